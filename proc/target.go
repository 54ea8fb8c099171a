// Package proc runs a lesson's application instance as a real child
// process of the lab, the hidden `outboxlab worker --role ROLE` subcommand,
// with a connection of its own, and talks to it over a pipe.
//
// The protocol is JSON lines. The parent writes one line of work on the
// child's stdin: its role, the database to open ([Target]) and what to do.
// The child writes [Report] lines on its stdout. At a named failpoint the
// child reports {"at":"<point>"}, with what it has done so far and its
// statement ledger, then blocks reading stdin: the parent either lets it go
// on ({"go":true}, the barrier) or kills it with SIGKILL there, a real
// process death ([Child.Kill]). A child that waits at its failpoint for a
// signal instead ([Worker.AwaitSignal]) is sent one it handles, such as
// SIGTERM ([Child.Signal]), and goes on by itself to its Done report and
// its own exit ([Child.Wait] kills it if it does not exit in time, and
// says so). The scenario clock reaches the child the
// same way, as times in its work. A child that dies unexpectedly, prints
// anything that is not a report, or says nothing for too long fails the run
// with an error that names it; it never hangs the run.
package proc

import (
	"context"
	"errors"

	"github.com/outboxlab/outboxlab/store"
)

// Target is the database a child opens, as the parent's connections open
// it: an SQLite file (WAL, busy timeout, BEGIN IMMEDIATE, from
// [store.DefaultConfig]) or a PostgreSQL server and the run's schema.
type Target struct {
	Engine store.Engine `json:"engine"`
	Path   string       `json:"path,omitempty"`   // SQLite: the database file
	URL    string       `json:"url,omitempty"`    // PostgreSQL: the server
	Schema string       `json:"schema,omitempty"` // PostgreSQL: the run's schema for this database
	// SlotFile, when set, guards the connection for an engineer's slot
	// file (the claim, an exercise's statement), as the parent's
	// connections are guarded.
	SlotFile *store.SlotFile `json:"slotFile,omitempty"`
}

// Open opens one connection to t, recording into ledger.
func (t Target) Open(ctx context.Context, ledger *store.Ledger) (*store.DB, error) {
	cfg := store.DefaultConfig
	cfg.Ledger = ledger
	cfg.SlotFile = t.SlotFile
	switch t.Engine {
	case store.Postgres:
		return store.OpenPostgres(ctx, t.URL, t.Schema, cfg)
	case store.SQLite, "":
		if t.Path == "" {
			return nil, errors.New("proc: the target names no SQLite file")
		}
		return store.Open(ctx, t.Path, cfg)
	default:
		return nil, errors.New("proc: unknown engine " + string(t.Engine))
	}
}
