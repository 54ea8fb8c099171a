package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/store"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "print the tables of a database kept with --keep-db (opened read-only)",
		ArgsUsage: "DATABASE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "rows", Value: "50", Usage: "show at most `N` rows of each table"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one database path (the \"database\" a --keep-db run printed)")
			}
			rows, err := parseCount("rows", c.String("rows"))
			if err != nil {
				return err
			}
			if rows < 1 {
				return usagef("--rows must be at least 1, not %d", rows)
			}
			path := c.Args().First()
			if err := checkDatabaseFile(path); err != nil {
				return err
			}
			db, err := store.Open(c.Context, path, store.Config{ReadOnly: true})
			switch {
			case errors.Is(err, store.ErrNotDatabase):
				return usagef("inspect: %s is not an SQLite database", path)
			case errors.Is(err, store.ErrLocked):
				return usagef("inspect: %s is locked by another process; try again when it has finished", path)
			case err != nil:
				return usagef("inspect: %v", err)
			}
			defer db.Close()
			tables, err := db.Dump(c.Context, rows)
			if err != nil {
				return usagef("inspect: %v", err)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "%s: %d tables\n", path, len(tables))
			for _, t := range tables {
				fmt.Fprintf(w, "\n== %s (%d rows", t.Name, t.Total)
				if t.Total > len(t.Rows) {
					fmt.Fprintf(w, ", first %d shown", len(t.Rows))
				}
				fmt.Fprintln(w, ")")
				if len(t.Rows) == 0 {
					continue
				}
				if err := reports.WriteTable(w, lab.Table{Columns: t.Columns, Rows: t.Rows}); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// checkDatabaseFile refuses what cannot be a kept database before SQLite
// sees it: a folder, a FIFO (which would block), a device such as
// /dev/zero or /dev/null, an empty file, and a file that does not start
// with SQLite's header.
func checkDatabaseFile(path string) error {
	f, st, err := openRegular(path)
	if errors.Is(err, errNotRegular) {
		return usagef("inspect: %s is not a database file (%v)", path, err)
	}
	if err != nil {
		return usagef("inspect: %s: %v", path, err)
	}
	defer f.Close()
	if st.Size() == 0 {
		return usagef("inspect: %s is empty, not an SQLite database", path)
	}
	// SQLite takes a short file for an empty database: "0 tables".
	err = store.CheckDatabaseHeader(f)
	switch {
	case errors.Is(err, store.ErrNotDatabase):
		return usagef("inspect: %s is not an SQLite database", path)
	case err != nil:
		return usagef("inspect: %s: %v", path, err)
	}
	return nil
}
