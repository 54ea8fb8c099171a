package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
)

// Template is a seeded database that many runs start from (the explorer's
// orderings): each [Template.Restore] gives a database exactly the
// template's rows. On SQLite it is the file's bytes, written over the
// run's file; on PostgreSQL it is the template's schema, whose tables are
// copied into the run's schema by one function call.
type Template struct {
	file   []byte // SQLite: the closed template file
	schema string // PostgreSQL: the template's schema

	mu    sync.Mutex
	conns map[string]*DB // PostgreSQL: one connection per restored path, kept warm
}

// copyTemplateFn is the server-side function a PostgreSQL template copies
// with: the source's tables created in the target schema where missing
// (columns, defaults, identity, checks and indexes; not foreign keys),
// every table of the target schema emptied (DELETE, newest table first, so
// a foreign key never points at a deleted row; cheaper than TRUNCATE on small tables), then filled from the
// source schema's table of the same name in creation order (so a foreign
// key finds its row), and each identity column's sequence moved past the
// copied ids.
var (
	copyTemplateFn = audit("lab: install the template copy function (PostgreSQL)", `CREATE OR REPLACE FUNCTION outboxlab_copy_template(source text, target text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    tbl record;
    col record;
BEGIN
    FOR tbl IN SELECT r.relname FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
               WHERE n.nspname = source AND r.relkind = 'r' ORDER BY r.oid LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I.%I (LIKE %I.%I INCLUDING ALL)', target, tbl.relname, source, tbl.relname);
    END LOOP;
    FOR tbl IN SELECT r.relname FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
               WHERE n.nspname = target AND r.relkind = 'r' ORDER BY r.oid DESC LOOP
        EXECUTE format('DELETE FROM %I.%I', target, tbl.relname);
    END LOOP;
    FOR tbl IN SELECT r.relname FROM pg_class r JOIN pg_namespace n ON n.oid = r.relnamespace
               WHERE n.nspname = source AND r.relkind = 'r' ORDER BY r.oid LOOP
        EXECUTE format('INSERT INTO %I.%I SELECT * FROM %I.%I', target, tbl.relname, source, tbl.relname);
    END LOOP;
    FOR col IN SELECT table_name, column_name FROM information_schema.columns
               WHERE table_schema = target AND is_identity = 'YES' LOOP
        EXECUTE format('SELECT setval(pg_get_serial_sequence(%L, %L), coalesce(max(%I), 0) + 1, false) FROM %I.%I',
                       target || '.' || col.table_name, col.column_name, col.column_name, target, col.table_name);
    END LOOP;
END
$$`)
	copyTemplateSQL = audit("lab: reset the run's schema to the seeded template (PostgreSQL)",
		`SELECT outboxlab_copy_template(:source, current_schema())`)
)

// NewTemplate takes the database at path, seeded and closed, as a
// template; open opens it (on PostgreSQL, its schema).
func NewTemplate(ctx context.Context, open func(ctx context.Context, path string) (*DB, error), path string) (*Template, error) {
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if db.Engine() == Postgres {
		if _, err := db.sql.ExecContext(ctx, copyTemplateFn.SQL); err != nil {
			return nil, fmt.Errorf("store: template function: %w", err)
		}
		return &Template{schema: db.schema, conns: map[string]*DB{}}, nil
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: read template: %w", err)
	}
	return &Template{file: b}, nil
}

// Restore makes the database at path hold exactly the template's rows.
func (t *Template) Restore(ctx context.Context, open func(ctx context.Context, path string) (*DB, error), path string) error {
	if t.schema == "" {
		if err := RemoveFiles(path); err != nil {
			return err
		}
		if err := os.WriteFile(path, t.file, 0o644); err != nil {
			return fmt.Errorf("store: copy template: %w", err)
		}
		return nil
	}
	db, err := t.conn(ctx, open, path)
	if err != nil {
		return err
	}
	if _, err := db.sql.ExecContext(ctx, copyTemplateSQL.SQL, sql.Named("source", t.schema)); err != nil {
		return fmt.Errorf("store: copy template: %w", err)
	}
	return nil
}

// conn is the connection that restores path, opened (and given the copy
// function) on first use and kept: a fresh PostgreSQL backend spends most
// of a restore warming its catalog caches.
func (t *Template) conn(ctx context.Context, open func(ctx context.Context, path string) (*DB, error), path string) (*DB, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if db, ok := t.conns[path]; ok {
		return db, nil
	}
	db, err := open(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := db.sql.ExecContext(ctx, copyTemplateFn.SQL); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: template function: %w", err)
	}
	t.conns[path] = db
	return db, nil
}

// Close closes the connections the template kept.
func (t *Template) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first error
	for path, db := range t.conns {
		if err := db.Close(); err != nil && first == nil {
			first = err
		}
		delete(t.conns, path)
	}
	return first
}
