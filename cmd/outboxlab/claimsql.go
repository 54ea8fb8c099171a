package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/scenarios"
	"github.com/outboxlab/outboxlab/store"
)

// readClaimSQL reads an engineer's claim: a file with two statements
// separated by a semicolon, the SELECT that picks the oldest claimable
// message's Id and the UPDATE that takes message :id. Both may use the named
// parameters :now, :worker and :until; the UPDATE also gets :id. The file
// is untrusted: it must be a regular file of at most 1 MiB, and the engine
// that will run it must find a read-only SELECT and an UPDATE of
// OutboxMessages (see loadSlotFile). Any refusal is a usage error (exit 2).
func readClaimSQL(ctx context.Context, path string, onPostgres bool) (*lesson.Submission, error) {
	if path == "" {
		return nil, usagef("--claim-sql needs a claim file: name one (see examples/)")
	}
	claim, err := scenarios.LookupExercise("claim")
	if err != nil {
		return nil, err
	}
	sub, err := loadSubmission(ctx, claim, path, onPostgres)
	if err != nil {
		return nil, usagef("--claim-sql %s: %v", path, err)
	}
	return sub, nil
}

// loadSubmission reads and checks the file at path as an answer to x (see
// loadSlotFile).
func loadSubmission(ctx context.Context, x *scenarios.Exercise, path string, onPostgres bool) (*lesson.Submission, error) {
	f, err := loadSlotFile(ctx, x.Slot(), path, onPostgres)
	if err != nil {
		return nil, err
	}
	return x.Submit(filepath.Base(path), f), nil
}

// loadSlotFile reads and splits the file at path for slot and, for
// SQLite, has SQLite check it (store.CheckSlotFile). A file for
// PostgreSQL (onPostgres) is checked by PostgreSQL itself, in the run's
// own database before the run (store.GraderRole.CheckSlotFile): each
// engine judges what it will run with its own parser.
func loadSlotFile(ctx context.Context, slot store.Slot, path string, onPostgres bool) (store.SlotFile, error) {
	if path == "" {
		return store.SlotFile{}, fmt.Errorf("%w: the file's name is empty; name the file that holds your %s", errUnreadable, slot.Name)
	}
	b, err := readRegularFile(path, store.MaxSlotFileSize)
	if err != nil {
		return store.SlotFile{}, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	f, err := store.ParseSlotFile(slot, string(b))
	if err != nil {
		return store.SlotFile{}, err
	}
	if onPostgres {
		return f, nil
	}
	if err := store.CheckSlotFile(ctx, f); err != nil {
		return store.SlotFile{}, err
	}
	return f, nil
}

// errUnreadable means a slot file could not be read as one: missing, not
// a regular file, unreadable, or over its size limit. It is the file's
// fault, as a refusal is.
var errUnreadable = errors.New("cannot read it")

// errNotRegular means a path names a FIFO, a device, a socket or a folder.
var errNotRegular = errors.New("not a regular file")

// openRegular opens path for reading only if it is a regular file. It
// opens without blocking, so a FIFO with no writer is refused rather than
// waited on, and checks the file it opened, not the name.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, unwrapPathError(err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		what := "a device, FIFO or socket"
		if st.IsDir() {
			what = "a folder"
		}
		return nil, nil, fmt.Errorf("%w: it is %s", errNotRegular, what)
	}
	return f, st, nil
}

// readRegularFile reads at most limit bytes of the regular file at path;
// a longer file is refused, not truncated.
func readRegularFile(path string, limit int64) ([]byte, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d KiB; a file holds a lesson's statement or two", limit>>10)
	}
	return b, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
