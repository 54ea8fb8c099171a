package instance

import (
	"context"
	"errors"
	"testing"
)

// TestProcessesTable: a run in the lab's process has no processes table;
// a run with processes that started none says why.
func TestProcessesTable(t *testing.T) {
	t.Run("InProcess", func(t *testing.T) {
		if _, ok := New(Config{}).ProcessesTable(); ok {
			t.Error("a run in the lab's process has a processes table")
		}
	})
	t.Run("NoChild", func(t *testing.T) {
		procs, ok := New(Config{Processes: true}).ProcessesTable()
		if !ok || len(procs.Rows) != 0 || procs.Note != inProcessNote {
			t.Errorf("processes table %+v (%v), want no row and the note %q", procs, ok, inProcessNote)
		}
	})
}

// closer counts its closes and fails with err.
type closer struct {
	closes int
	err    error
}

func (c *closer) Close(context.Context) error {
	c.closes++
	return c.err
}

// TestSet: a set closes every instance once, in order, and returns every
// error; a second Close does nothing.
func TestSet(t *testing.T) {
	ctx := context.Background()
	failed := errors.New("child exited 1")
	a, b := &closer{}, &closer{err: failed}
	var s Set
	s.Add(a)
	s.Add(b)
	if err := s.Close(ctx); !errors.Is(err, failed) {
		t.Errorf("Close = %v, want %v", err, failed)
	}
	if err := s.Close(ctx); err != nil || a.closes != 1 || b.closes != 1 {
		t.Errorf("second Close = %v; closes %d, %d, want 1, 1", err, a.closes, b.closes)
	}
	if err := CloseAll(ctx, a, b); !errors.Is(err, failed) || a.closes != 2 {
		t.Errorf("CloseAll = %v, closes %d", err, a.closes)
	}
}
