package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/runfolder"
	"github.com/outboxlab/outboxlab/store"
)

// TestRunOnPostgres runs the Day 15 pair on the test server as a user
// would: the JSON says "postgres", the figures are SQLite's, the report
// names the server without a password and the run's schema, and the schema
// is gone afterwards (kept with --keep-db).
func TestRunOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	for _, keep := range []bool{false, true} {
		args := []string{"run", "session-15-outbox-leasing", "session-15-competing-workers-no-claim", "--db", url, "--format", "json", "--out", t.TempDir()}
		if keep {
			args = append(args, "--keep-db")
		}
		got := runCLI(t, args...)
		if got.code != 0 {
			t.Fatalf("exit %d: %s %s", got.code, got.stdout, got.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(got.stdout), "\n") {
			var r reports.JSONResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("bad JSON %q: %v", line, err)
			}
			if r.Engine != "postgres" || !r.Passed {
				t.Errorf("%s: engine %q, passed %v", r.Scenario, r.Engine, r.Passed)
			}
			want := map[string]float64{"processing_attempts": 6, "paid": 4, "failed": 2, "claim_lock_waits": 0}
			if r.Scenario == "session-15-competing-workers-no-claim" {
				want = map[string]float64{"processing_attempts": 12, "status_checks": 12, "processed_more_than_once": 6}
			}
			for k, v := range want {
				if m, ok := r.Metrics[k]; !ok || m != v {
					t.Errorf("%s: %s = %v (present %v), want %v", r.Scenario, k, m, ok, v)
				}
			}
			report, err := os.ReadFile(r.Report)
			if err != nil {
				t.Fatal(err)
			}
			schema := schemaNamed(t, string(report))
			if noBlanks := strings.Join(strings.Fields(databaseFieldOf(string(report))), ""); !strings.Contains(noBlanks, store.RedactURL(url)) || !strings.Contains(string(report), "FOR UPDATE") && r.Scenario == "session-15-outbox-leasing" {
				t.Errorf("%s: report lacks the server or the PostgreSQL claim", r.Scenario)
			}
			if exists := schemaExists(t, url, schema); exists != keep {
				t.Errorf("%s: schema %s exists = %v after the run, want %v", r.Scenario, schema, exists, keep)
			}
			if keep {
				if err := store.DropSchema(context.Background(), url, schema, store.Config{}); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// TestRunOnPostgresHidesThePassword: a password in --db never reaches a
// report, stdout or stderr.
func TestRunOnPostgresHidesThePassword(t *testing.T) {
	t.Parallel()
	got := runCLI(t, "run", "session-16-stale-ack-fencing", "--db", "postgres://lab:s3cr3t-pw@127.0.0.1:1/none?sslmode=disable")
	if got.code != 2 || strings.Contains(got.stdout+got.stderr, "s3cr3t-pw") {
		t.Fatalf("exit %d; the password leaked or the error is missing: %s %s", got.code, got.stdout, got.stderr)
	}
}

// schemaNamed reads the run's schema from the report's Database line.
func schemaNamed(t *testing.T, report string) string {
	t.Helper()
	if _, rest, ok := strings.Cut(databaseFieldOf(report), ", schema "); ok {
		return strings.Fields(rest)[0]
	}
	t.Fatalf("no schema in the report's Database field:\n%s", report)
	return ""
}

// databaseFieldOf is the report's Database field, its value's wrapped
// lines joined by one blank (a value wider than the report's 120 columns
// goes on under itself).
func databaseFieldOf(report string) string {
	return strings.Join(strings.Fields(databaseField.FindString(report)), " ")
}

func schemaExists(t *testing.T, url, schema string) bool {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.Count(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = ?", schema)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// graderPassword matches a grader role's password (24 random bytes in
// hex), which must appear in no output.
var graderPassword = regexp.MustCompile(`[0-9a-f]{48}`)

// graderRoleLine reads the role, its rights and its database from a
// report's Database line.
var graderRoleLine = regexp.MustCompile(`claim file ran as login role (outboxlab_grader_[0-9a-f]{8}), rights: USAGE, CREATE on schema (outboxlab_session_15_outbox_leasing_[0-9a-f]{8}) only, in database (outboxlab_grade_[0-9a-f]{8}), its own`)

// pgHostileFiles are claim files written for PostgreSQL, by mistake or on
// purpose: syntax SQLite reads otherwise, functions with side effects,
// objects in other schemas, statements that are not queries; and two
// that use PostgreSQL's own dialect well. victim is a schema of the --db
// login's database.
func pgHostileFiles(victim string) []hostileFile {
	where := "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
	sel := func(cond string) string {
		return "SELECT Id FROM OutboxMessages WHERE " + where + " AND " + cond + " ORDER BY CreatedAtUtc, Id LIMIT 1;\n" + okUpdate
	}
	return []hostileFile{
		{name: "pg-array-alias-nextval.sql", text: "SELECT m.Id FROM OutboxMessages m, (SELECT ARRAY [nextval('" + victim + ".s')] FROM (SELECT 1 AS ARRAY) a) b LIMIT 1;\n" + okUpdate, verdict: "REFUSED", reason: "does not exist"},
		{name: "pg-array-alias-own-sequence.sql", text: "SELECT m.Id FROM OutboxMessages m, (SELECT ARRAY [nextval('outboxmessages_id_seq')] FROM (SELECT 1 AS ARRAY) a) b LIMIT 1;\n" + okUpdate, verdict: "REFUSED", reason: "calls nextval(regclass)"},
		{name: "pg-regclass-cast.sql", text: sel("nextval(('outboxmessages' || '_id_seq')::regclass) > 0"), verdict: "REFUSED", reason: "calls nextval(regclass)"},
		{name: "pg-unicode-name.sql", text: sel(`U&"\006eextval"('outboxmessages_id_seq') > 0`), verdict: "REFUSED", reason: "calls nextval(regclass)"},
		{name: "pg-sleep.sql", text: sel("pg_sleep(5) IS NOT NULL"), verdict: "REFUSED", reason: "calls pg_sleep(double precision)"},
		{name: "pg-set-config.sql", text: sel("set_config('search_path', 'public', false) <> ''"), verdict: "REFUSED", reason: "calls set_config"},
		{name: "pg-lo-from-bytea.sql", text: sel("lo_from_bytea(0, 'x') > 0"), verdict: "REFUSED", reason: "calls lo_from_bytea"},
		{name: "pg-advisory-lock.sql", text: sel("pg_advisory_lock(42) IS NOT NULL"), verdict: "REFUSED", reason: "calls pg_advisory_lock"},
		{name: "pg-notify.sql", text: sel("pg_notify('outbox', 'x') IS NOT NULL"), verdict: "REFUSED", reason: "calls pg_notify"},
		{name: "pg-txid-current.sql", text: sel("txid_current() > 0"), verdict: "REFUSED", reason: "calls txid_current()"},
		{name: "pg-dollar-quoted.sql", text: sel("Payload <> $$ ;-- $$ AND lo_from_bytea(0, 'x') > 0"), verdict: "REFUSED", reason: "unterminated dollar-quoted string"},
		{name: "pg-copy-program.sql", text: "COPY (SELECT 1) TO PROGRAM 'touch /tmp/outboxlab-pwned';\n" + okUpdate, verdict: "REFUSED", reason: "reads it as COPY"},
		{name: "pg-do-block.sql", text: "DO 'BEGIN PERFORM lo_from_bytea(0, ''x''); END';\n" + okUpdate, verdict: "REFUSED", reason: "reads it as DO"},
		{name: "pg-set-role.sql", text: okSelect + ";\nSET ROLE postgres", verdict: "REFUSED", reason: "reads it as SET"},
		{name: "pg-writable-with.sql", text: okSelect + ";\nWITH paid AS (UPDATE Payments SET PaymentStatus = 'Paid' RETURNING Id) " + okUpdate, verdict: "REFUSED", reason: "an UPDATE with UPDATE"},
		{name: "pg-for-update-other-schema.sql", text: "SELECT m.Id FROM OutboxMessages m, " + victim + ".t v LIMIT 1 FOR UPDATE;\n" + okUpdate, verdict: "REFUSED", reason: "does not exist"},
		{name: "pg-catalog.sql", text: "SELECT count(*) FROM pg_stat_activity;\n" + okUpdate, verdict: "REFUSED", reason: "names pg_stat_activity"},
		{name: "pg-for-update-skip-locked.sql", text: strings.Replace(okSelect, "LIMIT 1", "LIMIT 1 FOR UPDATE SKIP LOCKED", 1) + ";\n" + okUpdate, verdict: "PASS"},
		{name: "pg-casts.sql", text: "SELECT Id FROM OutboxMessages WHERE Status = ANY(ARRAY['Pending']::text[]) OR (Status = 'Processing' AND LockedUntilUtc::text <= :now) ORDER BY CreatedAtUtc, Id LIMIT 1;\n" + okUpdate, verdict: "PASS"},
	}
}

// TestGradeOnPostgres grades the examples, the class's claim files and
// files written for PostgreSQL on the test server, two at a time.
// PostgreSQL's parser judges each: every verdict is the one SQLite gives
// (TestGradeHostileFiles), with the server's own reasons; each judged file
// ran as a role of its own, in a database of its own, with rights on its
// own schema only; no role, database, schema or password is left
// anywhere afterwards, and nothing else on the server changed.
func TestGradeOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	started := time.Now()
	dir := t.TempDir()
	victim := pgtest.VictimSchema(t, url)
	files := append(hostileFiles(dir), pgHostileFiles(victim)...)
	paths := writeHostileFiles(t, dir, files)
	for _, ex := range []struct{ name, verdict, reason string }{{"claim-lesson.sql", "PASS", ""}, {"claim-pending-only.sql", "FAIL", "recovery_ok"}} {
		files = append(files, hostileFile{name: ex.name, verdict: ex.verdict, reason: ex.reason})
		paths = append(paths, filepath.Join("..", "..", "examples", ex.name))
	}
	// The dialect's differences, not the sandbox's. One file's SELECT
	// ends "ORDER BY CreatedAtUtc, Id AND Payload <> 'a;b'", an integer
	// AND a boolean, which SQLite computes and PostgreSQL refuses; the
	// others are refused as on SQLite, in PostgreSQL's words.
	onPostgres := map[string]hostileFile{
		"semicolons-quoted.sql": {verdict: "REFUSED", reason: "argument of AND must be type boolean"},
		"drop-table.sql":        {verdict: "REFUSED", reason: "reads it as DROP TABLE"},
		"drop-in-update.sql":    {verdict: "REFUSED", reason: "reads it as DROP TABLE"},
		"update-payments.sql":   {verdict: "REFUSED", reason: "an UPDATE of payments"},
		"two-selects.sql":       {verdict: "REFUSED", reason: "parses it as SELECT"},
	}
	for i, f := range files {
		if pg, ok := onPostgres[f.name]; ok {
			files[i].verdict, files[i].reason = pg.verdict, pg.reason
		}
	}
	before := pgtest.ServerState(t, url, victim)
	out := filepath.Join(t.TempDir(), "reports")
	o := runCLI(t, append([]string{"grade", "--db", url, "--jobs", "2", "--format", "json", "--out", out, "--timeout", "1m"}, paths...)...)
	if o.code != exitUsage {
		t.Errorf("exit %d, want %d (some files could not be judged); stderr %s", o.code, exitUsage, o.stderr)
	}
	got := byFileName(gradesOf(t, o.stdout))
	roles, schemas := map[string]bool{}, map[string]bool{}
	texts := []string{o.stdout, o.stderr}
	for _, f := range files {
		g, ok := got[f.name]
		switch {
		case !ok:
			t.Errorf("%s: no JSON object", f.name)
			continue
		case g.verdict() != f.verdict:
			t.Errorf("%s: verdict %s on PostgreSQL, want %s (error %q, failed %v)", f.name, g.verdict(), f.verdict, g.Error, g.FailedChecks)
		case !strings.Contains(g.Error+" "+strings.Join(g.FailedChecks, " "), f.reason):
			t.Errorf("%s: %q %v does not say %q", f.name, g.Error, g.FailedChecks, f.reason)
		}
		if g.Report == "" {
			continue
		}
		report, err := os.ReadFile(g.Report)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(report))
		// A long Database line may be wrapped: read it as one.
		m := graderRoleLine.FindStringSubmatch(strings.Join(strings.Fields(string(report)), " "))
		if m == nil {
			t.Errorf("%s: the report does not name the role it ran as:\n%s", f.name, report)
			continue
		}
		if roles[m[1]] || schemas[m[2]] {
			t.Errorf("%s: role %s or schema %s shared with another file", f.name, m[1], m[2])
		}
		roles[m[1]], schemas[m[2]] = true, true
		if roleExists(t, url, m[1]) || schemaExists(t, url, m[2]) || databaseExists(t, url, m[3]) {
			t.Errorf("%s: role %s, schema %s or database %s left after grade", f.name, m[1], m[2], m[3])
		}
	}
	if len(roles) != 7 {
		t.Errorf("%d roles named in reports, want one for each of the 7 files judged", len(roles))
	}
	if after := pgtest.ServerState(t, url, victim); after != before {
		t.Errorf("grading changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	summaries, _ := filepath.Glob(filepath.Join(out, "Grade", "*.txt"))
	for _, s := range summaries {
		b, _ := os.ReadFile(s)
		texts = append(texts, string(b))
	}
	for _, text := range texts {
		if pw := graderPassword.FindString(text); pw != "" {
			t.Errorf("output holds what may be a role's password %s", pw)
		}
	}
	noGraderRolesLeft(t, url, started)
}

// TestRunClaimOnPostgres runs a claim file with --processes (session 15's
// Worker-A is a child process, which must log in as the role too) and
// --keep-db: the run's database stays with its schema, handed to the
// URL's login, and the role is dropped all the same.
func TestRunClaimOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	started := time.Now()
	o := runCLI(t, "run", "session-15-outbox-leasing", "--claim-sql", filepath.Join("..", "..", "examples", "claim-lesson.sql"),
		"--db", url, "--processes", "--keep-db", "--format", "json", "--out", t.TempDir())
	if o.code != 0 {
		t.Fatalf("exit %d: %s %s", o.code, o.stdout, o.stderr)
	}
	var r reports.JSONResult
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatal(err)
	}
	m := graderRoleLine.FindStringSubmatch(r.Database)
	if m == nil || !r.Passed || r.Engine != "postgres" {
		t.Fatalf("database %q, passed %v, engine %q", r.Database, r.Passed, r.Engine)
	}
	t.Cleanup(func() { pgtest.Exec(t, url, "DROP DATABASE IF EXISTS "+m[3]+" WITH (FORCE)") })
	kept := strings.Replace(url, "/postgres?", "/"+m[3]+"?", 1)
	if roleExists(t, url, m[1]) || !databaseExists(t, url, m[3]) || kept == url || !schemaExists(t, kept, m[2]) {
		t.Errorf("after --keep-db: role %s exists %v (want false), database %s exists %v, schema %s in it (want both)", m[1], roleExists(t, url, m[1]), m[3], databaseExists(t, url, m[3]), m[2])
	}
	report, err := os.ReadFile(r.Report)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), "SIGKILL") {
		t.Errorf("the report shows no child process killed:\n%s", report)
	}
	if pw := graderPassword.FindString(o.stdout + o.stderr + string(report)); pw != "" {
		t.Errorf("output holds what may be a role's password %s", pw)
	}
	noGraderRolesLeft(t, url, started)
}

// TestGradeOnPostgresTimeout: a file whose run outlasts --timeout leaves
// no role behind.
func TestGradeOnPostgresTimeout(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	started := time.Now()
	o := runCLI(t, "grade", "--db", url, "--format", "json", "--timeout", "300ms", "--out", filepath.Join(t.TempDir(), "r"), filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	var g grade
	if err := json.Unmarshal([]byte(o.stdout), &g); err != nil {
		t.Fatalf("exit %d, %q: %v; stderr %s", o.code, o.stdout, err, o.stderr)
	}
	if o.code != exitUsage || !strings.Contains(g.Error, "gave up after 300ms") {
		t.Errorf("exit %d, error %q; want 2 and a timeout", o.code, g.Error)
	}
	noGraderRolesLeft(t, url, started)
}

// TestGradeOnPostgresWithoutCreateRole: a login that may not create roles
// gets exit 2 and an error naming the right it lacks, before any run.
func TestGradeOnPostgresWithoutCreateRole(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "outboxlab_test_plain_" + hex.EncodeToString(b[:])
	pgtest.Exec(t, url, "CREATE ROLE "+name+" LOGIN")
	t.Cleanup(func() { pgtest.Exec(t, url, "DROP ROLE IF EXISTS "+name) })
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("user")
	u.RawQuery, u.User = q.Encode(), neturl.User(name)
	for _, args := range [][]string{
		{"grade", "--db", u.String(), "--out", filepath.Join(t.TempDir(), "r"), filepath.Join("..", "..", "examples", "claim-lesson.sql")},
		{"run", "session-15-outbox-leasing", "--db", u.String(), "--out", t.TempDir(), "--claim-sql", filepath.Join("..", "..", "examples", "claim-lesson.sql")},
	} {
		o := runCLI(t, args...)
		if o.code != exitUsage || !strings.Contains(o.stderr, "CREATEROLE") || !strings.Contains(o.stderr, name) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and the missing CREATEROLE of %s", args[0], o.code, o.stderr, name)
		}
	}
}

func databaseExists(t *testing.T, url, name string) bool {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.Count(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = ?", name)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func roleExists(t *testing.T, url, role string) bool {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n, err := db.Count(context.Background(), "SELECT count(*) FROM pg_roles WHERE rolname = ?", role)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// noGraderRolesLeft fails t when a grader role this process made since
// started is still there 30 s later. A role's VALID UNTIL is its creation
// time plus store.GraderRoleLifetime, its comment names the process that
// made it; other tests' roles of this process come and go within seconds,
// a leaked one stays (the grades other tests kill on purpose are other
// processes).
func noGraderRolesLeft(t *testing.T, url string, started time.Time) {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), url, "", store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	since := started.Add(store.GraderRoleLifetime - time.Second).UTC().Format(time.RFC3339)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		n, err := db.Count(context.Background(), "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'outboxlab\\_grader\\_%' AND rolvaliduntil >= ?::timestamptz "+
			"AND shobj_description(oid, 'pg_authid') LIKE ?", since, fmt.Sprintf("%%by process %d on %%", os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d grader roles made since the test started are still there", n)
			return
		}
	}
}

// slowerClaimSQL passes every check, on either engine, and each of its
// SELECTs counts a million rows, so a grade of it lives for seconds.
const slowerClaimSQL = `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
  AND (WITH t(x) AS (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10))
       SELECT count(*) FROM t a, t b, t c, t d, t e, t f) > 0
ORDER BY CreatedAtUtc, Id LIMIT 1;
` + okUpdate

// startGrade starts the program grading files on the server at url, and
// waits until one of its grades has its role and database on the server:
// it returns the process and that grade's id. The grade is found by the
// advisory lock its process holds (see store.GraderRole).
func startGrade(t *testing.T, bin, url string, files ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"grade", "--db", url, "--jobs", "1", "--format", "json", "--out", t.TempDir()}, files...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	host, _ := os.Hostname()
	app := fmt.Sprintf("outboxlab grade (pid %d on %s)", cmd.Process.Pid, host)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ids := pgtest.Strings(t, url, `SELECT id FROM (
  SELECT lpad(to_hex(l.objid::bigint), 8, '0') AS id FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
  WHERE a.application_name = $1 AND l.locktype = 'advisory' AND l.granted) g
WHERE EXISTS (SELECT 1 FROM pg_database WHERE datname = 'outboxlab_grade_' || g.id)
  AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'outboxlab_grader_' || g.id)`, app)
		if len(ids) > 0 {
			return cmd, ids[0]
		}
	}
	t.Fatalf("grade %d made no role and database within 30 s; stderr %s", cmd.Process.Pid, stderr.String())
	return nil, ""
}

// otherSweep is how long a test waits for a grade's leftovers that a
// sweep of its own passed by: another test's grade may be sweeping them,
// holding their lock, and then they are gone once that sweep ends.
const otherSweep = 10 * time.Second

// goneWithin says role and database are gone from the server at url, or
// are within wait.
func goneWithin(t *testing.T, url, role, database string, wait time.Duration) bool {
	t.Helper()
	return pgtest.Within(wait, func() bool { return !roleExists(t, url, role) && !databaseExists(t, url, database) })
}

// TestGradeOnPostgresSweepsAfterSIGKILL: a grade killed with SIGKILL
// leaves its role and its database; a sweep removes them and leaves alone
// those of a grade still running, which finishes with every file judged
// (a grade whose database was swept from under it could not); and the
// next grade sweeps and says what it removed. Other tests' grades on the
// same server sweep too, so who removed the leftovers is not asserted,
// only that they are gone.
func TestGradeOnPostgresSweepsAfterSIGKILL(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	bin := binary(t)
	slow := filepath.Join(t.TempDir(), "slow.sql")
	if err := os.WriteFile(slow, []byte(slowerClaimSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	running, liveID := startGrade(t, bin, url, slow, slow, slow, slow)
	killed, deadID := startGrade(t, bin, url, slow, slow, slow)
	if err := killed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	deadRole, deadDB := "outboxlab_grader_"+deadID, "outboxlab_grade_"+deadID

	// A sweep while the running grade surely runs: it takes what the
	// killed grade left and nothing of the running one's.
	swept, err := store.SweepGraders(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if !runfolder.Alive(running.Process.Pid) {
		t.Fatal("the running grade ended before the sweep: make slow.sql slower")
	}
	sweptDead := false
	for _, g := range swept {
		if g.ID == liveID {
			t.Errorf("the sweep took the running grade's %+v", g)
		}
		if g.ID == deadID {
			// Another test's sweep may have taken the role or the database
			// first: this one reports what it removed, only the killed
			// grade's, and is done only when it removed both.
			sweptDead = g.Role == deadRole && g.Database == deadDB
			if (g.Role != deadRole && g.Role != "") || (g.Database != deadDB && g.Database != "") || g.Err != nil {
				t.Errorf("the sweep of the killed grade: %+v, want role %s and database %s (or one of them)", g, deadRole, deadDB)
			}
		}
	}
	wait := otherSweep
	if sweptDead {
		wait = 0 // this sweep removed them
	}
	if !goneWithin(t, url, deadRole, deadDB, wait) {
		t.Errorf("role %s or database %s is still there after a sweep", deadRole, deadDB)
	}

	// The next grade sweeps first, and says what it removed.
	again, againID := startGrade(t, bin, url, slow)
	if err := again.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = again.Wait()
	o := runCLI(t, "grade", "--db", url, "--out", t.TempDir(), filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	if o.code != exitOK {
		t.Fatalf("the next grade: exit %d, %s %s", o.code, o.stdout, o.stderr)
	}
	if !goneWithin(t, url, "outboxlab_grader_"+againID, "outboxlab_grade_"+againID, otherSweep) {
		t.Errorf("the killed grade %s's role or database is still there after the next grade", againID)
	}
	if !strings.Contains(o.stderr, "removed role outboxlab_grader_"+againID+", database outboxlab_grade_"+againID+", left by a grade whose process is gone") {
		t.Logf("the next grade did not remove %s itself (another test's grade swept first): %s", againID, o.stderr)
	}
	if strings.Contains(o.stderr, liveID) {
		t.Errorf("the next grade touched the running grade's %s: %s", liveID, o.stderr)
	}
	if err := running.Wait(); err != nil {
		t.Errorf("the running grade, whose objects a sweep must leave alone: %v", err)
	}
}

// TestGradeOnPostgresRefusesPublicSequence: a server where PUBLIC holds
// USAGE on a sequence cannot host a grade (nextval would move it for
// everyone): exit 2 before any file, naming the sequence and the REVOKE.
func TestGradeOnPostgresRefusesPublicSequence(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "outboxlab_test_seqdb_" + hex.EncodeToString(b[:])
	pgtest.Exec(t, url, "CREATE DATABASE "+name)
	t.Cleanup(func() { pgtest.Exec(t, url, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	dsn := strings.Replace(url, "/postgres?", "/"+name+"?", 1)
	if dsn == url {
		t.Skip("the test server's URL names no database /postgres to replace")
	}
	pgtest.Exec(t, dsn, "CREATE SCHEMA shop", "CREATE SEQUENCE shop.order_numbers", "GRANT USAGE ON SEQUENCE shop.order_numbers TO PUBLIC")
	o := runCLI(t, "grade", "--db", dsn, "--out", t.TempDir(), filepath.Join("..", "..", "examples", "claim-lesson.sql"))
	if o.code != exitUsage || !strings.Contains(o.stderr, "use the sequence shop.order_numbers") || !strings.Contains(o.stderr, "REVOKE ALL ON SEQUENCE") {
		t.Errorf("exit %d, stderr %q; want 2 naming shop.order_numbers and a REVOKE", o.code, o.stderr)
	}
	if strings.Contains(o.stdout, "PASS") {
		t.Errorf("a file was graded: %s", o.stdout)
	}
}

// TestGradeOnPostgresBoundsStatements: on PostgreSQL too, a statement
// slow only on the run's rows (not on the check's four) is the file's
// fault, exit 2, the statement named, whether the time limit or the
// temporary files limit stops it; and the 127 values of 8 MB are refused.
func TestGradeOnPostgresBoundsStatements(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	dir := t.TempDir()
	where := "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
	files := map[string]string{
		// Four hundred million rows of a nested loop: seconds of CPU.
		"slow-on-run-rows.sql": "SELECT Id FROM OutboxMessages WHERE " + where + " AND (Id <> 5 OR (SELECT count(*) FROM generate_series(1, 20000) a, generate_series(1, 20000) b) > 0) ORDER BY CreatedAtUtc, Id LIMIT 1;\n" + okUpdate,
		// Two hundred million rows kept for a count: temporary files.
		"big-on-run-rows.sql": "SELECT Id FROM OutboxMessages WHERE " + where + " AND (Id <> 5 OR (SELECT count(*) FROM generate_series(1, 200000000)) > 0) ORDER BY CreatedAtUtc, Id LIMIT 1;\n" + okUpdate,
		"sort127.sql":         "SELECT count(*) FROM (SELECT repeat('x', 8000000) || g AS b FROM generate_series(1, 127) g GROUP BY b) s;\n" + okUpdate,
	}
	paths := writeFiles(t, dir, files)
	o := runCLI(t, append([]string{"grade", "--db", url, "--format", "json", "--out", t.TempDir()}, paths...)...)
	if o.code != exitUsage {
		t.Errorf("exit %d, want %d; stderr %s", o.code, exitUsage, o.stderr)
	}
	want := map[string]string{
		"slow-on-run-rows.sql": "its first statement failed in the run: ",
		"big-on-run-rows.sql":  "its first statement failed in the run: ",
		"sort127.sql":          "refused: first statement: ",
	}
	for _, g := range gradesOf(t, o.stdout) {
		name := filepath.Base(g.File)
		if !strings.HasPrefix(g.Error, want[name]) {
			t.Errorf("%s: %q, want it to start %q", name, g.Error, want[name])
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("no verdict for %v", want)
	}
	o = runCLI(t, "run", "session-15-outbox-leasing", "--db", url, "--claim-sql", filepath.Join(dir, "slow-on-run-rows.sql"), "--out", t.TempDir())
	if o.code != exitUsage || !strings.Contains(o.stderr, "its first statement failed in the run") {
		t.Errorf("run --claim-sql: exit %d, stderr %q; want 2 naming the first statement", o.code, o.stderr)
	}
}
