package reports

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

// Path is where a report of r started at t goes, before any de-duplication:
// <out>/<Session>/<Session>-<FileTag>[-<variant>][-YourSQL]-RunReport-<UTC timestamp>.txt
func Path(out string, r *lab.Result, t time.Time) string {
	stem := r.Session + "-" + r.FileTag
	if r.Variant != "" {
		stem += "-" + r.Variant
	}
	if r.CustomSQL != "" {
		stem += "-YourSQL"
	}
	return filepath.Join(out, r.Session, stem+"-RunReport-"+t.UTC().Format("20060102T150405Z")+".txt")
}

// Write renders r and files it under out, never overwriting an existing
// report: a second run in the same second gets a -2 suffix, then -3, and so
// on. It returns the path written.
func Write(out string, r *lab.Result, info RunInfo) (string, error) {
	var buf bytes.Buffer
	if err := Text(&buf, r, info); err != nil {
		return "", err
	}
	return WriteNew(Path(out, r, info.Started), buf.Bytes())
}

// WriteNew files data at path, whole or not at all, and never over an
// existing file: it writes a temporary file in the same folder, then links
// it to path (a link fails if the name exists) and removes the temporary
// name. If path exists it tries path with -2, -3, … before the extension.
// A failed write (a full disk) leaves nothing behind.
func WriteNew(path string, data []byte) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("reports: cannot create report folder: %w", err)
	}
	tmp, err := writeTemp(dir, data)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	ext := filepath.Ext(path)
	base := strings.TrimSuffix(path, ext)
	for n := 1; n < 1000; n++ {
		candidate := path
		if n > 1 {
			candidate = fmt.Sprintf("%s-%d%s", base, n, ext)
		}
		err := os.Link(tmp, candidate)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("reports: cannot write report: %w", err)
		}
		return candidate, nil
	}
	return "", fmt.Errorf("reports: %s: 999 reports already exist for this second", path)
}

// writeData writes a report's bytes; tests replace it to fill the disk.
var writeData = func(f *os.File, data []byte) (int, error) { return f.Write(data) }

// writeTemp writes data whole to a new hidden file in dir and returns its
// name; on any failure it removes the file.
func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".outboxlab-report-*.tmp")
	if err != nil {
		return "", fmt.Errorf("reports: cannot write report: %w", err)
	}
	name := f.Name()
	_, err = writeData(f, data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o644)
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("reports: write %s: %w", filepath.Join(dir, filepath.Base(name)), err)
	}
	return name, nil
}

// CheckWritable reports whether out can take reports, creating it if needed,
// so a bad --out fails before any scenario runs.
func CheckWritable(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("output folder %s cannot be created: %w", out, unwrapPath(err))
	}
	f, err := os.CreateTemp(out, ".outboxlab-write-check-*")
	if err != nil {
		return fmt.Errorf("output folder %s is not writable: %w", out, unwrapPath(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// unwrapPath drops the repeated path from an *fs.PathError for one-line messages.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
