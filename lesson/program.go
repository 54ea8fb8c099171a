package lesson

import (
	"context"
	"fmt"

	"github.com/outboxlab/outboxlab/store"
)

// OpenProgram opens one instance of a user's program's own connection to
// the database at path, guarded by the run's [Options.Program] sandbox and
// recording into the run's ledger: on SQLite the sandbox's authorizer
// judges its statements, on PostgreSQL it logs in as the run's role, which
// may use the sandbox's tables and nothing else. cfg sets the rest (a
// busy timeout, say).
func (e *Env) OpenProgram(ctx context.Context, path string, cfg store.Config) (*store.DB, error) {
	if e.Options.Program == nil {
		return nil, fmt.Errorf("lesson: %s starts no program (Options.Program is not set)", e.Scenario.Name)
	}
	cfg.Ledger, cfg.Program = e.Ledger, e.Options.Program
	if e.server != nil {
		return e.server.openProgram(ctx, path, cfg)
	}
	return store.Open(ctx, path, cfg)
}
