package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/runfolder"
	"github.com/outboxlab/outboxlab/store"
)

// versionCommand prints what this build is and which database engines it
// runs: the module's version (or its commit), Go's, the SQLite library's
// as the driver reports it, and PostgreSQL's driver and, with --db, server.
func versionCommand(s *settings) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the lab's version and the SQLite and PostgreSQL versions it runs (also: outboxlab --version)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "db", Usage: "also ask the PostgreSQL server at `URL` for its version"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("version takes no arguments, not %q", c.Args().First())
			}
			return printVersion(c.Context, s, c.App.Writer, c.String("db"))
		},
	}
}

// printVersion writes the version lines; with dsn it asks that PostgreSQL
// server for its version (an unreachable server is a usage error: exit 2).
func printVersion(ctx context.Context, s *settings, w io.Writer, dsn string) error {
	if dsn != "" && !store.IsPostgresURL(dsn) {
		return usagef("--db takes a postgres:// URL (or postgresql://), and what it was given does not start so") // not echoed: it may hold a password
	}
	info, ok := debug.ReadBuildInfo()
	module, sqliteDriver, pgDriver := "(unknown: built without module information)", "", ""
	if ok {
		module = info.Main.Path + " " + buildVersion(info)
		sqliteDriver, pgDriver = depVersion(info, "modernc.org/sqlite"), depVersion(info, "github.com/jackc/pgx/v5")
	}
	sqlite, err := sqliteVersion(ctx, s)
	if err != nil {
		return err
	}
	server := "not asked (give --db URL to ask a server)"
	if dsn != "" {
		if server, err = postgresVersion(ctx, dsn); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "outboxlab:  %s\n", module)
	fmt.Fprintf(w, "Go:         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "SQLite:     %s (modernc.org/sqlite %s, pure Go)\n", sqlite, sqliteDriver)
	fmt.Fprintf(w, "PostgreSQL: driver github.com/jackc/pgx/v5 %s; server %s\n", pgDriver, server)
	return nil
}

// buildVersion is the module's version, or for a build from a checkout
// the commit it was built from (and whether the tree had changes).
func buildVersion(info *debug.BuildInfo) string {
	version := info.Main.Version
	var revision, modified string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			revision = kv.Value
		case "vcs.modified":
			modified = kv.Value
		}
	}
	if (version == "" || version == "(devel)") && revision != "" {
		version = "commit " + revision[:min(12, len(revision))]
		if modified == "true" {
			version += " with uncommitted changes"
		}
	}
	if version == "" {
		version = "(devel)"
	}
	return version
}

// depVersion is the version of the module path this build uses, or
// "(not in this build)".
func depVersion(info *debug.BuildInfo, path string) string {
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version + " (replacing " + d.Version + ")"
			}
			return d.Version
		}
	}
	return "(not in this build)"
}

// sqliteVersion asks the SQLite library for its version, on a database in
// a temporary run folder removed at once.
func sqliteVersion(ctx context.Context, s *settings) (string, error) {
	dir, done, err := runfolder.New(s.tempRoot, runfolder.Prefix+"version-", false, s.warn)
	if err != nil {
		return "", fmt.Errorf("a temporary folder: %w", err)
	}
	defer done()
	db, err := store.Open(ctx, filepath.Join(dir, "version.db"), store.Config{})
	if err != nil {
		return "", err
	}
	defer db.Close()
	return db.SQLiteVersion(ctx)
}

// postgresVersion asks the server at dsn for its version.
func postgresVersion(ctx context.Context, dsn string) (string, error) {
	db, err := store.OpenPostgres(ctx, dsn, "", store.Config{})
	if err != nil {
		return "", &usageError{err}
	}
	defer db.Close()
	v, err := db.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	return v + " at " + store.RedactURL(dsn), nil
}
