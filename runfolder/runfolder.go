// Package runfolder makes the temporary folders runs work in, removes them
// without hiding a failure, and sweeps away the folders of runs whose
// process is gone (a SIGKILLed bench leaves its databases behind).
//
// Each folder a run may remove when it ends holds a marker file naming the
// process that made it. A folder is swept only when its marker names a
// process of this host that no longer exists and is older than the sweep's
// minimum age; a folder without a marker (a kept database) is never swept.
package runfolder

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Prefix starts the name of every run folder.
const Prefix = "outboxlab-"

// Marker is the file in a run folder that names its owning process.
const Marker = ".outboxlab-owner"

// New makes a folder named prefix* under root ("" is the system's temporary
// folder). Unless keep is set it writes the owner marker, and done removes
// the folder, passing a failure to warn (when not nil) instead of ignoring
// it. A kept folder gets no marker, so no sweep ever takes it; its done does
// nothing.
func New(root, prefix string, keep bool, warn func(error)) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp(root, prefix)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return dir, func() {}, nil
	}
	if err := writeMarker(dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, func() { Remove(dir, warn) }, nil
}

// Remove removes dir and everything in it. A failure goes to warn (when not
// nil) as an error naming the folder, so it is never silently left behind.
func Remove(dir string, warn func(error)) {
	if err := os.RemoveAll(dir); err != nil && warn != nil {
		warn(fmt.Errorf("could not remove the temporary folder %s: %w", dir, err))
	}
}

// writeMarker records this process (and host) as dir's owner.
func writeMarker(dir string) error {
	host, _ := os.Hostname()
	text := fmt.Sprintf("pid %d\nhost %s\n", os.Getpid(), host)
	return os.WriteFile(filepath.Join(dir, Marker), []byte(text), 0o644)
}

// owner reads dir's marker: the pid and host that made it. ok is false
// when there is no marker or it cannot be read as one.
func owner(dir string) (pid int, host string, made time.Time, ok bool) {
	path := filepath.Join(dir, Marker)
	st, err := os.Lstat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() > 4096 {
		return 0, "", time.Time{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, "", time.Time{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "pid":
			pid, err = strconv.Atoi(value)
			if err != nil {
				return 0, "", time.Time{}, false
			}
		case "host":
			host = value
		}
	}
	return pid, host, st.ModTime(), pid > 0
}

// Swept is a folder a sweep removed (or tried to).
type Swept struct {
	Dir   string
	Pid   int   // the process that made it, now gone
	Bytes int64 // what it held
	Err   error // why it could not be removed, or nil
}

// Sweep removes the run folders under root ("" is the system's temporary
// folder) whose marker names a process of this host that no longer exists,
// and whose marker is older than minAge. It never touches a folder without
// a marker, of another host, or whose process lives.
func Sweep(root string, minAge time.Duration, now time.Time) []Swept {
	if root == "" {
		root = os.TempDir()
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	host, _ := os.Hostname()
	var out []Swept
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), Prefix) {
			continue // ReadDir does not follow symbolic links: a link is not a dir here
		}
		dir := filepath.Join(root, e.Name())
		pid, h, made, ok := owner(dir)
		if !ok || h != host || now.Sub(made) < minAge || Alive(pid) {
			continue
		}
		s := Swept{Dir: dir, Pid: pid, Bytes: size(dir)}
		s.Err = os.RemoveAll(dir)
		out = append(out, s)
	}
	return out
}

// Alive reports whether process pid exists. Only "no such process" counts
// as gone: a process we may not signal (EPERM) is alive.
func Alive(pid int) bool {
	if pid <= 0 {
		return true // not a process we can judge: keep its folder
	}
	if pid == os.Getpid() {
		return true
	}
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	return !zombie(pid)
}

// zombie reports whether pid has exited but is not yet reaped (Linux's
// /proc/PID/stat state Z): a killed process that still answers signal 0.
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "PID (COMMAND) STATE ...": the command may hold ')', so take the last.
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'Z'
}

// size is the bytes of the regular files under dir.
func size(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// Kept is a run's failure (an interruption, too) when its folder was kept:
// it says where the database stayed, for the sqlite3 shell or `inspect`.
type Kept struct {
	Dir string
	Err error
}

func (e *Kept) Error() string { return fmt.Sprintf("%v (database kept in %s)", e.Err, e.Dir) }

// Unwrap is the run's own failure.
func (e *Kept) Unwrap() error { return e.Err }
