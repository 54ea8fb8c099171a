package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
)

// databaseHeader is how every SQLite database file begins.
const databaseHeader = "SQLite format 3\x00"

// CheckDatabaseHeader reads the start of a non-empty file and returns
// [ErrNotDatabase] unless it is SQLite's 16-byte header. SQLite itself
// would take a short file for an empty database and show no tables.
func CheckDatabaseHeader(r io.Reader) error {
	b := make([]byte, len(databaseHeader))
	_, err := io.ReadFull(r, b)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrNotDatabase
	case err != nil:
		return fmt.Errorf("store: read the database header: %w", err)
	case !bytes.Equal(b, []byte(databaseHeader)):
		return ErrNotDatabase
	}
	return nil
}

// TableDump is one table's contents as text, for `outboxlab inspect`.
type TableDump struct {
	Name    string
	Total   int // rows in the table; Rows holds at most the limit asked for
	Columns []string
	Rows    [][]string
}

// listTablesSQL lists a database's own tables for `outboxlab inspect`.
var listTablesSQL = audit("inspect: list the tables in creation order",
	"SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")

// Dump reads every user table, in creation order, with up to limit rows of
// each. Values print as SQLite would show them; NULL prints as NULL.
func (db *DB) Dump(ctx context.Context, limit int) ([]TableDump, error) {
	rows, err := db.sql.QueryContext(ctx, listTablesSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: list tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list tables: %w", err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list tables: %w", err)
	}
	var out []TableDump
	for _, name := range names {
		t, err := db.dumpTable(ctx, name, limit)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (db *DB) dumpTable(ctx context.Context, name string, limit int) (TableDump, error) {
	t := TableDump{Name: name}
	quoted := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM "+quoted).Scan(&t.Total); err != nil {
		return t, fmt.Errorf("store: count %s: %w", name, err)
	}
	rows, err := db.sql.QueryContext(ctx, "SELECT * FROM "+quoted+" LIMIT ?", limit)
	if err != nil {
		return t, fmt.Errorf("store: read %s: %w", name, err)
	}
	defer rows.Close()
	if t.Columns, err = rows.Columns(); err != nil {
		return t, fmt.Errorf("store: read %s: %w", name, err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(t.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return t, fmt.Errorf("store: read %s: %w", name, err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, rows.Err()
}
