package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"path/filepath"
	"testing"
)

// Statements of this test only: registered in the catalogue like the
// lessons' own, so the ledger names them.
var (
	ledgerTestCreate = auditOn("ledger test: create the table", `CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)`,
		postgresDDL(`CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)`))
	ledgerTestInsert = named("ledger test: insert a row", `INSERT INTO t (v) VALUES (:v)`)
	ledgerTestGuard  = named("ledger test: bump a row only while v is 1", `UPDATE t SET v = v + 1 WHERE id = :id AND v = 1`)
	ledgerTestBlind  = mistake(&ledgerTestGuard, "drops the guard AND v = 1", "ledger test: bump a row by id alone", `UPDATE t SET v = v + 1 WHERE id = :id`)
	ledgerTestRead   = audit("ledger test: read every row", `SELECT id, v FROM t ORDER BY id`)
)

func openLedgerDB(t *testing.T) (*DB, *Ledger) {
	t.Helper()
	l := &Ledger{}
	cfg := DefaultConfig
	cfg.Ledger = l
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.sql.Exec(ledgerTestCreate.SQL); err != nil {
		t.Fatal(err)
	}
	return db, l
}

func entry(t *testing.T, l *Ledger, s Stmt) LedgerEntry {
	t.Helper()
	for _, e := range l.Entries() {
		if e.Stmt.SQL == s.SQL {
			return e
		}
	}
	t.Fatalf("the ledger never saw %q", s.Name)
	return LedgerEntry{}
}

func TestLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, l := openLedgerDB(t)
	for v := range 3 {
		if _, err := db.sql.ExecContext(ctx, ledgerTestInsert.SQL, sql.Named("v", v)); err != nil {
			t.Fatal(err)
		}
	}
	// Two updates in one transaction that commits; one that rolls back.
	if _, err := db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, ledgerTestGuard.SQL, sql.Named("id", 2)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, ledgerTestBlind.SQL, sql.Named("id", 1))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, ledgerTestGuard.SQL, sql.Named("id", 3)); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	rows, err := db.sql.QueryContext(ctx, ledgerTestRead.SQL)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()

	t.Run("CountsRunsAndRows", func(t *testing.T) {
		tests := []struct {
			stmt       Stmt
			runs       int
			rows       int64
			mistake    bool
			replacedBy string
		}{
			{ledgerTestInsert, 3, 3, false, ""},
			{ledgerTestGuard, 2, 1, false, ""}, // id 2 had v 1; id 3 had v 2
			{ledgerTestBlind, 1, 1, true, ledgerTestGuard.Name},
			{ledgerTestRead, 1, 3, false, ""},
		}
		for _, tc := range tests {
			e := entry(t, l, tc.stmt)
			if e.Runs != tc.runs || e.Rows != tc.rows || e.Stmt.Name != tc.stmt.Name {
				t.Errorf("%s: runs %d rows %d name %q, want %d %d", tc.stmt.Name, e.Runs, e.Rows, e.Stmt.Name, tc.runs, tc.rows)
			}
			if tc.mistake && (e.Stmt.Replaces == nil || e.Stmt.Replaces.Name != tc.replacedBy || e.Stmt.Mistake == "") {
				t.Errorf("%s: not marked as the mistake replacing %q", tc.stmt.Name, tc.replacedBy)
			}
		}
	})
	t.Run("RecordsTransactions", func(t *testing.T) {
		var committed, rolledBack bool
		for _, tx := range l.Transactions() {
			if len(tx.Statements) == 2 && tx.Statements[0] == ledgerTestGuard.Name && tx.Statements[1] == "MISTAKE: "+ledgerTestBlind.Name && tx.Committed == 1 {
				committed = true
			}
			if len(tx.Statements) == 1 && tx.Statements[0] == ledgerTestGuard.Name && tx.RolledBack == 1 {
				rolledBack = true
			}
		}
		if !committed || !rolledBack {
			t.Errorf("transactions %+v: want the committed pair and the rolled-back update", l.Transactions())
		}
	})
	t.Run("CrashRollsBack", func(t *testing.T) {
		db2, l2 := openLedgerDB(t)
		conn, err := db2.sql.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The process dies with a transaction open: its connection closes
		// under it, as dieMidStep does.
		_ = conn.Raw(func(dc any) error {
			if _, err := dc.(driver.ConnBeginTx).BeginTx(ctx, driver.TxOptions{}); err != nil {
				t.Fatal(err)
			}
			args := []driver.NamedValue{{Name: "v", Ordinal: 1, Value: int64(9)}}
			if _, err := dc.(driver.ExecerContext).ExecContext(ctx, ledgerTestInsert.SQL, args); err != nil {
				t.Fatal(err)
			}
			if err := dc.(io.Closer).Close(); err != nil {
				t.Fatal(err)
			}
			return driver.ErrBadConn
		})
		txs := l2.Transactions()
		if len(txs) != 1 || txs[0].RolledBack != 1 || txs[0].Committed != 0 {
			t.Fatalf("transactions %+v, want one rolled back", txs)
		}
	})
}

func TestCatalogueNamesEveryStatementOnce(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, s := range Catalogue() {
		if s.Name == "" || s.SQL == "" {
			t.Errorf("catalogue entry without a name or text: %+v", s)
		}
		if names[s.Name] {
			t.Errorf("two statements are named %q", s.Name)
		}
		names[s.Name] = true
		if s.Replaces != nil && s.Mistake == "" {
			t.Errorf("%q replaces %q without saying what it changes", s.Name, s.Replaces.Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a second statement with the same text did not panic")
		}
	}()
	register(Stmt{Name: "duplicate", SQL: ledgerTestInsert.SQL})
}

// TestLedgerRowsOnlyForWrites: SQLite reports the last write's changed rows
// for any statement, so a PRAGMA after an insert must not inherit them.
func TestLedgerRowsOnlyForWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, l := openLedgerDB(t)
	if _, err := db.sql.ExecContext(ctx, ledgerTestInsert.SQL, sql.Named("v", 1)); err != nil {
		t.Fatal(err)
	}
	pragma := "PRAGMA user_version = 7"
	if _, err := db.sql.ExecContext(ctx, pragma); err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries() {
		if e.Stmt.SQL == pragma && e.Rows != 0 {
			t.Fatalf("the PRAGMA is recorded with %d rows changed", e.Rows)
		}
	}
}
