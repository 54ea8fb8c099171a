package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxlab/outboxlab/internal/pgtest"
)

// randomName is prefix with a random suffix, for a test's own schema,
// role or database on the shared test server.
func randomName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func roleExistsOn(t *testing.T, dsn, name string) bool {
	t.Helper()
	db, err := OpenPostgres(context.Background(), dsn, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ok, err := roleExists(context.Background(), db, name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestGraderRoleConfined: a claim file's statement, running as the grader
// role in its own database, can use its own schema and nothing else: no
// other schema's table there (even where PUBLIC may use the schema), no
// CREATE in public or a new schema, no extension (dblink), no server
// files or programs, no way to become another role; and nothing of the
// --db login's database, even what PUBLIC may use there (created after
// the role, so the server check does not refuse it), is reachable: its
// sequence does not move and its large objects stay as they were. The
// role and its database are gone after Drop.
func TestGraderRoleConfined(t *testing.T) {
	t.Parallel()
	server := pgtest.URL(t)
	ctx := context.Background()
	// The --db database of this test is its own: the rights it gives
	// PUBLIC would make other tests' grader roles refused.
	dbName := randomName("outboxlab_roletest_db_")
	pgtest.Exec(t, server, "CREATE DATABASE "+dbName)
	t.Cleanup(func() { pgtest.Exec(t, server, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)") })
	admin := strings.Replace(server, "/postgres?", "/"+dbName+"?", 1)
	if admin == server {
		t.Skip("the test server's URL names no database /postgres to replace")
	}
	r, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	dropped := false
	t.Cleanup(func() {
		if !dropped {
			_ = r.Drop(context.Background(), false)
		}
	})
	if !strings.HasPrefix(r.Name, "outboxlab_grader_") || !roleExistsOn(t, admin, r.Name) {
		t.Fatalf("role %q does not exist", r.Name)
	}
	if strings.Contains(RedactURL(r.URL()), r.password) {
		t.Fatal("RedactURL shows the role's password")
	}
	own, other, victim := randomName("outboxlab_roletest_own_"), randomName("outboxlab_roletest_other_"), randomName("outboxlab_roletest_victim_")
	pgtest.Exec(t, r.AdminURL(), "CREATE SCHEMA "+other, "CREATE TABLE "+other+".secret (v text)", "INSERT INTO "+other+".secret VALUES ('s3cret')",
		"GRANT USAGE ON SCHEMA "+other+" TO PUBLIC")
	pgtest.Exec(t, admin, "CREATE SCHEMA "+victim, "CREATE SEQUENCE "+victim+".s", "CREATE TABLE "+victim+".t (v text)",
		"GRANT USAGE ON SCHEMA "+victim+" TO PUBLIC", "GRANT USAGE, SELECT, UPDATE ON SEQUENCE "+victim+".s TO PUBLIC", "GRANT ALL ON "+victim+".t TO PUBLIC")
	t.Cleanup(func() { pgtest.Exec(t, admin, "DROP SCHEMA IF EXISTS "+victim+" CASCADE") })
	largeObjects := func() int {
		t.Helper()
		db, err := OpenPostgres(ctx, admin, "", Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n, err := db.Count(ctx, "SELECT count(*) FROM pg_largeobject_metadata")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	objectsBefore := largeObjects()
	conn := graderConn(t, r, own)
	for _, ok := range []string{"CREATE TABLE mine (v text)", "INSERT INTO mine VALUES ('x')", "SELECT count(*) FROM mine", "SELECT lo_from_bytea(0, 'x')"} {
		if _, err := conn.Exec(ctx, ok); err != nil {
			t.Fatalf("%s in its own schema: %v", ok, err)
		}
	}
	for _, tt := range []struct{ name, sql, code string }{
		{"ReadOtherSchema", "SELECT v FROM " + other + ".secret", "42501"},
		{"WriteOtherSchema", "INSERT INTO " + other + ".secret VALUES ('x')", "42501"},
		{"CreateInPublic", "CREATE TABLE public.planted (v text)", "42501"},
		{"CreateFunctionInPublic", "CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql AS 'SELECT $1'", "42501"},
		{"CreateSchema", "CREATE SCHEMA " + randomName("outboxlab_roletest_evil_"), "42501"},
		{"CreateExtension", "CREATE EXTENSION dblink", "42501"},
		{"ReadServerFile", "SELECT pg_read_file('/etc/passwd')", "42501"},
		{"CopyToProgram", "COPY (SELECT 1) TO PROGRAM 'true'", "42501"},
		{"CopyToFile", "COPY (SELECT 1) TO '/tmp/outboxlab-roletest-copy'", "42501"},
		{"LoExport", "SELECT lo_export(lo_from_bytea(0, 'x'), '/tmp/outboxlab-roletest-lo')", "42501"},
		{"SetRole", "SET ROLE postgres", "42501"},
		{"SetConfigRole", "SELECT set_config('role', 'postgres', false)", "42501"},
		{"SetSessionAuthorization", "SET SESSION AUTHORIZATION postgres", "42501"},
		{"ReadPasswords", "SELECT rolpassword FROM pg_authid", "42501"},
		{"AlterOwnRole", "ALTER ROLE " + r.Name + " SUPERUSER", "42501"},
		{"OtherDatabaseSequence", "SELECT nextval('" + victim + ".s')", "3F000 42P01"},
		{"OtherDatabaseTable", "INSERT INTO " + victim + ".t VALUES ('x')", "3F000 42P01"},
		{"OtherDatabaseByName", "SELECT v FROM " + dbName + "." + victim + ".t", "0A000"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conn.Exec(ctx, tt.sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || (!strings.Contains(tt.code, pe.Code) && pe.Code != "22023") {
				t.Errorf("%s: %v, want SQLSTATE %s", tt.sql, err, tt.code)
			}
		})
	}
	conn.Close(ctx)
	var last int64
	var called bool
	vc, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close(ctx)
	if err := vc.QueryRow(ctx, "SELECT last_value, is_called FROM "+victim+".s").Scan(&last, &called); err != nil || called {
		t.Errorf("the --db login's sequence moved: last_value %d, is_called %v (%v)", last, called, err)
	}
	if n := largeObjects(); n != objectsBefore {
		t.Errorf("the --db login's database has %d large objects, %d before: the role's were made there", n, objectsBefore)
	}
	if err := r.Drop(ctx, false); err != nil {
		t.Fatal(err)
	}
	dropped = true
	if roleExistsOn(t, admin, r.Name) {
		t.Errorf("role %s still exists after Drop", r.Name)
	}
	var dbs int
	if err := vc.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", r.Database).Scan(&dbs); err != nil || dbs != 0 {
		t.Errorf("database %s still exists after Drop (%v)", r.Database, err)
	}
}

// TestGraderRoleRefusedWherePublicReaches: on a database where PUBLIC may
// create in a shared schema, read a table or run a SECURITY DEFINER
// function, no grader role is made (a claim file could use those rights),
// and the error says which and how to revoke it. Each case has a database
// of its own, so the shared test database's other runs are unaffected.
func TestGraderRoleRefusedWherePublicReaches(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	for _, tt := range []struct{ name, grant, want string }{
		{"CreateInPublic", "GRANT CREATE ON SCHEMA public TO PUBLIC", "create objects in schema public"},
		{"ReadTable", "CREATE TABLE public.shared (v text); GRANT SELECT ON public.shared TO PUBLIC", "public.shared"},
		{"DefinerFunction", "CREATE FUNCTION public.escalate() RETURNS int LANGUAGE sql SECURITY DEFINER AS 'SELECT 1'", "public.escalate()"},
		{"UseSequence", "CREATE SCHEMA app; CREATE SEQUENCE app.ids; GRANT USAGE ON SEQUENCE app.ids TO PUBLIC", "use the sequence app.ids"},
		{"UseSequenceSchemaHidden", "CREATE SEQUENCE public.ids; GRANT USAGE ON SEQUENCE public.ids TO PUBLIC; REVOKE USAGE ON SCHEMA public FROM PUBLIC", "use the sequence public.ids"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dbName := randomName("outboxlab_roletest_db_")
			pgtest.Exec(t, admin, "CREATE DATABASE "+dbName)
			t.Cleanup(func() { pgtest.Exec(t, admin, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)") })
			dsn := strings.Replace(admin, "/postgres?", "/"+dbName+"?", 1)
			if dsn == admin {
				t.Skip("the test server's URL names no database /postgres to replace")
			}
			for _, s := range strings.Split(tt.grant, "; ") {
				pgtest.Exec(t, dsn, s)
			}
			r, err := CreateGraderRole(context.Background(), dsn)
			if err == nil {
				_ = r.Drop(context.Background(), false)
				t.Fatal("a grader role was made")
			}
			if !errors.Is(err, ErrNotConfined) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "REVOKE") {
				t.Errorf("error %v, want ErrNotConfined naming %q and a REVOKE", err, tt.want)
			}
		})
	}
}

// TestScramVerifierMatchesServer: the verifier CREATE ROLE gets is the one
// the server computes itself for the same password and salt.
func TestScramVerifierMatchesServer(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || !super {
		t.Skip("reading pg_authid needs a superuser")
	}
	name := randomName("outboxlab_roletest_scram_")
	for _, s := range []string{"SET password_encryption = 'scram-sha-256'", "CREATE ROLE " + name + " PASSWORD 'pw-for-test'"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	defer conn.Exec(ctx, "DROP ROLE "+name)
	var stored string
	if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", name).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	// SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>
	_, rest, _ := strings.Cut(stored, ":")
	saltB64, _, _ := strings.Cut(rest, "$")
	salt, err := base64.StdEncoding.DecodeString(saltB64)
	if err != nil {
		t.Fatalf("salt of %q: %v", stored, err)
	}
	if got := scramVerifier("pw-for-test", salt); got != stored {
		t.Errorf("verifier\n%s, server's\n%s", got, stored)
	}
}

// TestSlotFileNeedsConfinedLogin: a connection guarded for a slot file
// refuses a login with any attribute or membership, so neither the lab
// nor a child process runs a claim file as the login in --db.
func TestSlotFileNeedsConfinedLogin(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	db, err := OpenPostgres(context.Background(), admin, "", Config{SlotFile: &SlotFile{Slot: ClaimSlot, Texts: []string{"SELECT 1", "UPDATE x SET y = 1"}}})
	if err == nil {
		db.Close()
		t.Fatal("a claim file connection opened as the test server's own login")
	}
	if !strings.Contains(err.Error(), "confined login role") {
		t.Errorf("error %v does not say why", err)
	}
}

// TestCannotCreateRoles: a login without CREATEROLE gets an error that
// names the missing right.
func TestCannotCreateRoles(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	name := randomName("outboxlab_roletest_plain_")
	pgtest.Exec(t, admin, "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() { pgtest.Exec(t, admin, "DROP ROLE IF EXISTS "+name) })
	dsn, err := withLogin(admin, name, "")
	if err != nil {
		t.Fatal(err)
	}
	err = CheckCanCreateRoles(context.Background(), dsn)
	if !errors.Is(err, ErrCannotCreateRoles) || !strings.Contains(err.Error(), "CREATEROLE") || !strings.Contains(err.Error(), name) {
		t.Errorf("error %v, want ErrCannotCreateRoles naming CREATEROLE and %s", err, name)
	}
}

func TestWithLogin(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"postgres:///postgres?host=/tmp/pg&port=5432&user=postgres&sslmode=disable", "postgres://r:pw@/postgres?host=%2Ftmp%2Fpg&port=5432&sslmode=disable"},
		{"postgres://lab:old@db.example:5433/lab?sslmode=require&password=x", "postgres://r:pw@db.example:5433/lab?sslmode=require"},
	} {
		got, err := withLogin(tt.in, "r", "pw")
		if err != nil || got != tt.want {
			t.Errorf("withLogin(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// TestGraderRoleCancelled: a context that ends anywhere while the role is
// being made (a grade's --timeout, Ctrl-C) leaves no role behind.
func TestGraderRoleCancelled(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	started := time.Now()
	for d := time.Millisecond; d < 400*time.Millisecond; d = d * 3 / 2 {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		r, err := CreateGraderRole(ctx, admin)
		cancel()
		if err == nil {
			if err := r.Drop(context.Background(), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	db, err := OpenPostgres(context.Background(), admin, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Roles other tests of this process make now come and go within
	// seconds; a leaked one stays. VALID UNTIL tells the roles made since
	// this test started, their comment the process that made them (other
	// packages' tests, run at the same time, kill grades on purpose).
	since := started.Add(GraderRoleLifetime - time.Second).UTC().Format(time.RFC3339)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		names, err := strings1(context.Background(), db, `SELECT rolname FROM pg_roles WHERE rolname LIKE 'outboxlab\_grader\_%' AND rolvaliduntil >= $1::timestamptz
  AND shobj_description(oid, 'pg_authid') LIKE $2`, since, fmt.Sprintf("%%by process %d on %%", os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("roles left: %v", names)
		}
	}
}

// TestSweepGraders: a grade whose process is gone (its lock connection
// closed, as a SIGKILL closes it) leaves its role and database, and a
// sweep removes them, with the schemas an older outboxlab made for such a
// role in the --db login's database; the objects of a grade still running
// (its lock held) and a database kept by --keep-db stay.
func TestSweepGraders(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	ctx := context.Background()
	live, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Drop(context.Background(), false) })
	dead, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	dead.releaseLock() // the process is gone; its role and database stay
	t.Cleanup(func() { _ = dead.Drop(context.Background(), false) })
	kept, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := kept.Drop(ctx, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgtest.Exec(t, admin, "DROP DATABASE IF EXISTS "+kept.Database+" WITH (FORCE)") })
	// An older outboxlab's leftover: a role without a lock, and a schema
	// in the --db login's database granted to it, with its table.
	legacyRole, legacySchema := randomName(graderRolePrefix)[:len(graderRolePrefix)+8], randomName("outboxlab_session_15_outbox_leasing_")
	pgtest.Exec(t, admin, "CREATE ROLE "+legacyRole+" LOGIN", "CREATE SCHEMA "+legacySchema, "GRANT USAGE, CREATE ON SCHEMA "+legacySchema+" TO "+legacyRole,
		"SET ROLE "+legacyRole, "CREATE TABLE "+legacySchema+".outboxmessages (id int)", "RESET ROLE")
	t.Cleanup(func() {
		pgtest.Exec(t, admin, "DROP SCHEMA IF EXISTS "+legacySchema+" CASCADE", "DROP ROLE IF EXISTS "+legacyRole)
	})

	swept, err := SweepGraders(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SweptGrade{}
	for _, g := range swept {
		got[g.ID] = g
	}
	id := func(r *GraderRole) string { return strings.TrimPrefix(r.Name, graderRolePrefix) }
	// Other tests' grades, in this process or another, sweep too: what
	// this sweep reports of the dead grades is theirs unless another
	// took it first; that they are gone afterwards is asserted below.
	if g, ok := got[id(dead)]; ok && (g.Role != dead.Name && g.Role != "" || g.Database != dead.Database && g.Database != "" || g.Err != nil) {
		t.Errorf("the dead grade's sweep: %+v, want role %s and database %s", g, dead.Name, dead.Database)
	}
	if g, ok := got[strings.TrimPrefix(legacyRole, graderRolePrefix)]; ok && (g.Role != legacyRole || len(g.Schemas) > 1 || len(g.Schemas) == 1 && g.Schemas[0] != legacySchema || g.Err != nil) {
		t.Errorf("the legacy grade's sweep: %+v, want role %s and schema %s", g, legacyRole, legacySchema)
	}
	if _, ok := got[id(live)]; ok {
		t.Errorf("the sweep took the live grade's objects")
	}
	if _, ok := got[id(kept)]; ok {
		t.Errorf("the sweep took the kept database %s", kept.Database)
	}
	db, err := OpenPostgres(ctx, admin, "", Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string, args ...any) int {
		t.Helper()
		n, err := db.Count(ctx, q, args...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tt := range []struct {
		what, q, name string
		want          int
	}{
		{"dead role", "SELECT count(*) FROM pg_roles WHERE rolname = ?", dead.Name, 0},
		{"dead database", "SELECT count(*) FROM pg_database WHERE datname = ?", dead.Database, 0},
		{"legacy role", "SELECT count(*) FROM pg_roles WHERE rolname = ?", legacyRole, 0},
		{"legacy schema", "SELECT count(*) FROM pg_namespace WHERE nspname = ?", legacySchema, 0},
		{"live role", "SELECT count(*) FROM pg_roles WHERE rolname = ?", live.Name, 1},
		{"live database", "SELECT count(*) FROM pg_database WHERE datname = ?", live.Database, 1},
		{"kept database", "SELECT count(*) FROM pg_database WHERE datname = ?", kept.Database, 1},
	} {
		n := count(tt.q, tt.name)
		if n != tt.want && tt.want == 0 {
			// Another test's sweep may hold a leftover's lock, dropping
			// it, as this sweep passes it by: it is gone once that ends.
			pgtest.Within(10*time.Second, func() bool { n = count(tt.q, tt.name); return n == 0 })
		}
		if n != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.what, tt.name, n, tt.want)
		}
	}
}

// TestSweepGradersAcrossDatabases: a grade whose --db is another database
// of the same server holds its lock there; a sweep from this database
// still sees it alive (pg_locks shows every database's locks) and leaves
// its role and database alone.
func TestSweepGradersAcrossDatabases(t *testing.T) {
	t.Parallel()
	server := pgtest.URL(t)
	ctx := context.Background()
	dbName := randomName("outboxlab_roletest_db_")
	pgtest.Exec(t, server, "CREATE DATABASE "+dbName)
	t.Cleanup(func() { pgtest.Exec(t, server, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)") })
	other := strings.Replace(server, "/postgres?", "/"+dbName+"?", 1)
	if other == server {
		t.Skip("the test server's URL names no database /postgres to replace")
	}
	live, err := CreateGraderRole(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Drop(context.Background(), false) })
	swept, err := SweepGraders(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range swept {
		if g.Role == live.Name || g.Database == live.Database {
			t.Errorf("a sweep from another database took a live grade's %+v", g)
		}
	}
	if !roleExistsOn(t, server, live.Name) {
		t.Errorf("role %s was dropped", live.Name)
	}
}

// TestGradeLockOutlivesIdleTimeout: a grade counts as alive while its
// lock's connection, idle for the whole grade, lives. With the login's
// sessions ended after 1 s idle (here by the URL; a server or role
// setting does the same), the lock's connection turns both idle timeouts
// off, so after 1.5 s idle it still holds the lock. Before the fix the
// server ended it after 1 s ("terminating connection due to idle-session
// timeout") and a concurrent sweep would have dropped the live grade's
// role and database.
func TestGradeLockOutlivesIdleTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, p := range lockConnIdleParams {
		q.Set(p, "1s")
	}
	u.RawQuery = q.Encode()
	admin := u.String()
	r, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Drop(context.Background(), false) })

	other, err := connectAdmin(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	for _, p := range lockConnIdleParams {
		var onLock, onOther string
		if err := r.lock.QueryRow(ctx, "SELECT current_setting($1)", p).Scan(&onLock); err != nil {
			t.Fatal(err)
		}
		if err := other.QueryRow(ctx, "SELECT current_setting($1)", p).Scan(&onOther); err != nil {
			t.Fatal(err)
		}
		if onOther != "1s" {
			t.Fatalf("%s = %q on another connection of the URL, want 1s: the test sets nothing", p, onOther)
		}
		if onLock != "0" {
			t.Errorf("%s = %q on the lock's connection, want 0", p, onLock)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if err := r.lock.Ping(ctx); err != nil {
		t.Fatalf("the lock's connection died idle: %v", err)
	}
	if err := other.Ping(ctx); err == nil {
		t.Error("another connection of the URL outlived its 1 s idle timeout: the test proves nothing")
	}
}

// TestGraderRoleSessionDefaults: a session of the grader role starts with
// the role's bounds, and compiles nothing with JIT, not even a statement
// the planner costs far above jit_above_cost (a file's slow statement,
// run on the check's four rows) which a session of the login in --db
// does compile. Compiling took 60 to 140 ms idle and, on a loaded
// machine, the check's whole 2 s, refusing a file on the check's rows
// that only the run's rows should stop.
func TestGraderRoleSessionDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.URL(t)
	r, err := CreateGraderRole(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Drop(context.Background(), false) })
	conn, err := pgx.Connect(ctx, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, tc := range []struct{ setting, want string }{
		{"statement_timeout", graderStatementTimeout},
		{"idle_in_transaction_session_timeout", graderIdleInTxTimeout},
		{"work_mem", graderWorkMem},
		{"jit", "off"},
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", tc.setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s = %q in the role's session, want %q", tc.setting, got, tc.want)
		}
	}

	const costly = "EXPLAIN (ANALYZE) SELECT g FROM generate_series(1, 4) g WHERE g <> 5 OR (SELECT count(*) FROM generate_series(1, 200000000)) > 0"
	compiles := func(c *pgx.Conn) bool {
		rows, err := c.Query(ctx, costly)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(strings.Join(lines, "\n"), "JIT:")
	}
	if compiles(conn) {
		t.Error("the role's session compiled the statement with JIT")
	}
	other, err := connectAdmin(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var available bool
	if err := other.QueryRow(ctx, "SELECT pg_jit_available() AND current_setting('jit')::bool").Scan(&available); err != nil {
		t.Fatal(err)
	}
	switch {
	case !available:
		t.Log("this server has no JIT (or has it off): that the role's session compiled nothing proves little here")
	case !compiles(other):
		t.Error("the login's session did not compile the statement with JIT either: the test proves nothing")
	}
}
