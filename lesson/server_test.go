package lesson

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/store"
)

// TestConfinedServerSchemas: a run that takes a claim file makes its role
// and its database with its first schema, makes each schema in that
// database and grants it to the role, connects as it (children too:
// connURL), and drops role and database; a run without one makes no role
// and connects as the URL's login.
func TestConfinedServerSchemas(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	main := filepath.Join(t.TempDir(), "outboxlab.db")
	plain := newServerSchemas(url, "server-test", main, nil, nil)
	if _, err := plain.schemaFor(ctx, main); err != nil {
		t.Fatal(err)
	}
	if plain.role != nil || plain.connURL() != url {
		t.Errorf("a run without a claim file made role %v or connects as %s", plain.role, store.RedactURL(plain.connURL()))
	}
	plain.drop(false, func(err error) { t.Error(err) })

	s := newServerSchemas(url, "server-test", main, &store.SlotFile{Slot: store.ClaimSlot, Texts: []string{
		"SELECT Id FROM OutboxMessages WHERE Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now) ORDER BY CreatedAtUtc, Id LIMIT 1",
		"UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE Id = :id AND Status = 'Pending'",
	}}, nil)
	dropped := false
	t.Cleanup(func() {
		if !dropped {
			s.drop(false, nil)
		}
	})
	schema, err := s.schemaFor(ctx, main)
	if err != nil {
		t.Fatal(err)
	}
	extra, err := s.schemaFor(ctx, filepath.Join(filepath.Dir(main), "extra.db"))
	if err != nil {
		t.Fatal(err)
	}
	if s.role == nil || s.connURL() == url {
		t.Fatal("a run with a claim file made no role")
	}
	admin, err := store.OpenPostgres(ctx, url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	inRunDB, err := store.OpenPostgres(ctx, s.role.AdminURL(), "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer inRunDB.Close()
	count := func(db *store.DB, q string, args ...any) int {
		t.Helper()
		n, err := db.Count(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count(admin, "SELECT count(*) FROM pg_roles WHERE rolname = ? AND rolcanlogin AND NOT rolsuper AND NOT rolinherit", s.role.Name) != 1 {
		t.Fatalf("role %s is not there as a login role during the run", s.role.Name)
	}
	if count(admin, "SELECT count(*) FROM pg_database WHERE datname = ? AND has_database_privilege(?, oid, 'CONNECT') AND NOT has_database_privilege('public', oid, 'CONNECT')", s.role.Database, s.role.Name) != 1 {
		t.Fatalf("database %s is not the role's alone during the run", s.role.Database)
	}
	for _, sch := range []string{schema, extra} {
		if count(inRunDB, "SELECT count(*) FROM pg_namespace WHERE nspname = ? AND has_schema_privilege(?, oid, 'USAGE, CREATE')", sch, s.role.Name) != 1 {
			t.Errorf("role %s has no USAGE, CREATE on %s in its database", s.role.Name, sch)
		}
		if count(admin, "SELECT count(*) FROM pg_namespace WHERE nspname = ?", sch) != 0 {
			t.Errorf("schema %s is in the --db login's database", sch)
		}
	}
	inRunDB.Close()
	db, err := s.open(ctx, main, store.Config{SlotFile: &store.SlotFile{Slot: store.ClaimSlot, Texts: []string{"SELECT 1", "UPDATE x SET y = 1"}}})
	if err != nil {
		t.Fatalf("a claim file connection as the role: %v", err)
	}
	db.Close()
	if d := s.describe(); !strings.Contains(d, "claim file ran as login role "+s.role.Name) || !strings.Contains(d, "USAGE, CREATE on schemas "+schema+", "+extra+" only") {
		t.Errorf("describe: %s", d)
	}
	name, database := s.role.Name, s.role.Database
	s.drop(false, func(err error) { t.Error(err) })
	dropped = true
	if count(admin, "SELECT count(*) FROM pg_roles WHERE rolname = ?", name) != 0 || count(admin, "SELECT count(*) FROM pg_database WHERE datname = ?", database) != 0 {
		t.Errorf("role %s or database %s left after drop", name, database)
	}
}
