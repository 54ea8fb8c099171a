package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/outboxlab/outboxlab/reports"
)

// checkOut makes sure reports can be filed under out before anything runs:
// out can be created and written, and for each of reportPaths its folder
// can be created and a file with a name as long as the report's (and its
// -N suffix) can be created there. It removes what it tried.
func checkOut(out string, reportPaths ...string) error {
	if out == "" {
		return usagef("--out must name a folder")
	}
	if err := reports.CheckWritable(out); err != nil {
		return &usageError{err}
	}
	for _, p := range reportPaths {
		if err := probeReportPath(p); err != nil {
			return usagef("--out %s: a report cannot be written at %s: %v", out, p, err)
		}
	}
	return nil
}

// probeReportPath creates and removes a file in path's folder whose name is
// a little longer than path's, so a too-long name or a file in the way
// shows before the run rather than after it. The probe's name is unique
// (os.CreateTemp): graders sharing one --out probe the same report paths
// at once, and a fixed name made one of them fail with "file exists".
func probeReportPath(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("%s is in the way (a file, not a folder)", pe.Path)
		}
		return pathReason(err)
	}
	f, err := os.CreateTemp(dir, ".outboxlab-check-"+filepath.Base(path)+"-999-*")
	if err != nil {
		return pathReason(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// pathReason is err's reason without the repeated path, in words for the
// usual cases.
func pathReason(err error) error {
	switch {
	case errors.Is(err, syscall.ENAMETOOLONG):
		return errors.New("the path is too long")
	case errors.Is(err, syscall.ENOSPC):
		return errors.New("the disk is full")
	}
	return unwrapPathError(err)
}
