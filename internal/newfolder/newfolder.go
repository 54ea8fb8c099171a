// Package newfolder writes a set of files into a new or empty folder and
// never overwrites one: what `outboxlab course` and `exercise pack` write
// their output with.
package newfolder

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is one file to write: its path under the folder (it may name
// subfolders) and its text.
type File struct {
	Name string
	Text string
}

// NotEmptyError is [Write]'s refusal of a folder that holds something:
// the output never overwrites a file, nor mixes with other files.
type NotEmptyError struct {
	Dir  string
	What string // what was to be written there, e.g. "the course"
}

// Error says the folder holds files and what to do instead.
func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("--out %s exists and is not empty: %s is written only into a new or empty folder "+
		"(nothing was written; name another folder, or remove that one first)", e.Dir, e.What)
}

// NotAFolderError is [Write]'s refusal of a path that is a file.
type NotAFolderError struct{ Dir string }

// Error says the path is in the way.
func (e *NotAFolderError) Error() string {
	return fmt.Sprintf("--out %s is a file, not a folder (nothing was written)", e.Dir)
}

// Write writes files into dir, which it creates (with its parents) unless
// it exists empty, and each file's subfolders. It refuses a dir that
// exists and is not empty ([NotEmptyError], what names the output) or is
// a file ([NotAFolderError]), and never overwrites a file. It returns the
// paths it wrote.
func Write(dir, what string, files []File) ([]string, error) {
	info, err := os.Stat(dir)
	switch {
	case err == nil && !info.IsDir():
		return nil, &NotAFolderError{dir}
	case err == nil:
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("--out %s cannot be read: %w", dir, reason(err))
		}
		if len(entries) > 0 {
			return nil, &NotEmptyError{dir, what}
		}
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("--out %s cannot be created: %w", dir, reason(err))
		}
	default:
		return nil, fmt.Errorf("--out %s cannot be used: %w", dir, reason(err))
	}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, fmt.Errorf("--out %s: %s cannot be made: %w", dir, filepath.Dir(f.Name), reason(err))
		}
		if err := writeNew(path, f.Text); err != nil {
			return written, fmt.Errorf("--out %s: %s cannot be written: %w", dir, f.Name, reason(err))
		}
		written = append(written, path)
	}
	return written, nil
}

// writeNew writes text to a file at path that must not exist yet.
func writeNew(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// reason is err without the path a *fs.PathError repeats.
func reason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
