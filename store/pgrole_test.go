package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
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
// role, can use its own schema and nothing else: no other schema's table
// (even where PUBLIC may use the schema), no CREATE in public or a new
// schema, no server files or programs, no way to become another role. The
// role is gone after Drop, with what it made.
func TestGraderRoleConfined(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	ctx := context.Background()
	own, other := randomName("outboxlab_roletest_own_"), randomName("outboxlab_roletest_other_")
	pgtest.Exec(t, admin, "CREATE SCHEMA "+other, "CREATE TABLE "+other+".secret (v text)", "INSERT INTO "+other+".secret VALUES ('s3cret')",
		"GRANT USAGE ON SCHEMA "+other+" TO PUBLIC")
	t.Cleanup(func() {
		pgtest.Exec(t, admin, "DROP SCHEMA IF EXISTS "+other+" CASCADE", "DROP SCHEMA IF EXISTS "+own+" CASCADE")
	})

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
	if err := CreateSchema(ctx, admin, own, Config{}); err != nil {
		t.Fatal(err)
	}
	if err := r.GrantSchema(ctx, own); err != nil {
		t.Fatal(err)
	}
	pc, err := postgresConfig(r.URL(), own)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, ok := range []string{"CREATE TABLE mine (v text)", "INSERT INTO mine VALUES ('x')", "SELECT count(*) FROM mine"} {
		if _, err := conn.Exec(ctx, ok); err != nil {
			t.Fatalf("%s in its own schema: %v", ok, err)
		}
	}
	for _, tt := range []struct{ name, sql string }{
		{"ReadOtherSchema", "SELECT v FROM " + other + ".secret"},
		{"WriteOtherSchema", "INSERT INTO " + other + ".secret VALUES ('x')"},
		{"CreateInPublic", "CREATE TABLE public.planted (v text)"},
		{"CreateFunctionInPublic", "CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql AS 'SELECT $1'"},
		{"CreateSchema", "CREATE SCHEMA " + randomName("outboxlab_roletest_evil_")},
		{"ReadServerFile", "SELECT pg_read_file('/etc/passwd')"},
		{"CopyToProgram", "COPY (SELECT 1) TO PROGRAM 'true'"},
		{"CopyToFile", "COPY (SELECT 1) TO '/tmp/outboxlab-roletest-copy'"},
		{"LoExport", "SELECT lo_export(lo_from_bytea(0, 'x'), '/tmp/outboxlab-roletest-lo')"},
		{"SetRole", "SET ROLE postgres"},
		{"SetConfigRole", "SELECT set_config('role', 'postgres', false)"},
		{"SetSessionAuthorization", "SET SESSION AUTHORIZATION postgres"},
		{"ReadPasswords", "SELECT rolpassword FROM pg_authid"},
		{"AlterOwnRole", "ALTER ROLE " + r.Name + " SUPERUSER"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conn.Exec(ctx, tt.sql)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || (pe.Code != "42501" && pe.Code != "22023") {
				t.Errorf("%s: %v, want permission denied (42501)", tt.sql, err)
			}
		})
	}
	conn.Close(ctx)
	if err := r.Drop(ctx, false); err != nil {
		t.Fatal(err)
	}
	dropped = true
	if roleExistsOn(t, admin, r.Name) {
		t.Errorf("role %s still exists after Drop", r.Name)
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

// TestClaimFileNeedsConfinedLogin: a connection guarded for a claim file
// refuses a login with any attribute or membership, so neither the lab
// nor a child process runs a claim file as the login in --db.
func TestClaimFileNeedsConfinedLogin(t *testing.T) {
	t.Parallel()
	admin := pgtest.URL(t)
	db, err := OpenPostgres(context.Background(), admin, "", Config{ClaimFile: &ClaimFile{Select: "SELECT 1", Update: "UPDATE x SET y = 1"}})
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
	// Roles other tests make now come and go within seconds; a leaked one
	// stays. VALID UNTIL tells the roles made since this test started.
	since := started.Add(GraderRoleLifetime - time.Second).UTC().Format(time.RFC3339)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		names, err := strings1(context.Background(), db, `SELECT rolname FROM pg_roles WHERE rolname LIKE 'outboxlab\_grader\_%' AND rolvaliduntil >= $1::timestamptz`, since)
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
