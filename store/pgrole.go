package store

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A claim file is untrusted input. On SQLite an authorizer confines it
// (see [CheckSlotFile]); on PostgreSQL the server does, twice over.
//
// Confinement, the guarantee: each run that takes a claim file gets a
// [GraderRole], a fresh login role with no attribute and no membership,
// and a database of its own, outboxlab_grade_<id>, made from template0
// (so it holds no extension, dblink among them, and nothing of the
// server's other databases). The role may CONNECT to that database and
// use the run's schemas in it, nothing else; PUBLIC loses CONNECT and TEMP
// on it. Every connection of the run (its migrations, seeding, workers and
// child processes) logs in as that role to that database. PostgreSQL has
// no statement that reaches another database, so whatever a statement of
// the file calls, nothing outside the run's own database changes:
// another schema's sequence (nextval), large objects (lo_from_bytea),
// advisory locks and notifications are all per database, and the database
// is dropped (WITH (FORCE)) when the run ends. The role cannot read server
// files or run programs (pg_read_file, COPY ... TO PROGRAM, lo_export need
// a superuser or a pg_* role), SET ROLE or set_config('role', ...) can
// only switch to a role it is a member of, which is none, and its
// statements are bounded by its settings (statement_timeout, work_mem,
// and temp_file_limit where the login in --db may set it).
//
// Validation, the explanation: before the run, PostgreSQL's own parser
// judges the file in that database ([GraderRole.CheckSlotFile]): a read-
// only SELECT and an UPDATE of OutboxMessages, calling no function the
// server marks VOLATILE (nextval, setval, set_config, pg_sleep, lo_*,
// pg_advisory_lock, pg_notify, pg_terminate_backend, dblink, ...) and
// reading only the run's tables, so a file is refused with a reason
// rather than stopped by a missing right.
//
// A grade killed with SIGKILL cannot drop its role and database: each
// grade holds a session-level advisory lock, in the --db login's
// database, on a key its objects' names carry, for as long as they live.
// The lock dies with the grade's connection, so a later grade
// ([SweepGraders]) removes exactly the objects whose lock no session
// holds, in any database (pg_locks shows them all: graders of one server
// may use different --db databases, and roles and databases are the
// server's), those of grades that are gone, and never those of a grade
// still running.

// GraderRoleConnectionLimit is the most connections a grader role may hold
// at once: a session 15 run uses a handful, its child processes one each.
const GraderRoleConnectionLimit = 24

// GraderRoleLifetime is how long a grader role can log in at all (VALID
// UNTIL): a role a killed lab could not drop expires by itself.
const GraderRoleLifetime = 24 * time.Hour

// Session defaults of a grader role (ALTER ROLE ... SET): a backstop for a
// statement the lab does not bound itself, for a transaction left open,
// and the memory and temporary files one sort or hash may take.
// temp_file_limit needs a superuser to set: without one, the statement
// timeouts bound what a statement writes. JIT is off: a statement the
// planner costs high (a file's slow one, on the check's four rows) would
// otherwise spend its time limit, under load all of it, compiling code
// for rows it never reads, and be refused for that.
const (
	graderStatementTimeout = "30s"
	graderIdleInTxTimeout  = "1min"
	graderWorkMem          = "4MB"
	graderTempFileLimit    = "64MB"
)

// Prefixes of the names of a grade's objects on the server: the role and
// its database share the suffix, the grade's id.
const (
	graderRolePrefix     = "outboxlab_grader_"
	graderDatabasePrefix = "outboxlab_grade_"
)

// graderLockSpace is the first key of every grade's advisory lock
// (pg_try_advisory_lock(int, int)); the second is the grade's id.
const graderLockSpace = 0x6f786c62 // "oxlb"

// keptComment starts the comment of a grade's database that run --keep-db
// kept: a sweep leaves it alone.
const keptComment = "outboxlab: kept by --keep-db"

// ErrCannotCreateRoles means the login in --db may not create the
// throwaway role a claim file runs as.
var ErrCannotCreateRoles = errors.New("store: this login cannot create roles")

// ErrCannotCreateDatabases means the login in --db may not create the
// throwaway database a claim file runs in.
var ErrCannotCreateDatabases = errors.New("store: this login cannot create databases")

// ErrGraderLoginRefused means the server would not let the throwaway role
// log in (pg_hba.conf).
var ErrGraderLoginRefused = errors.New("store: the server refused the throwaway role's login")

// ErrServerTooOld means the server lacks what a claim file's run needs:
// SQL-standard function bodies, which the check reads (PostgreSQL 14),
// and DROP DATABASE ... WITH (FORCE) (13).
var ErrServerTooOld = errors.New("store: claim files need PostgreSQL 14 or later")

// ErrNotConfined means the throwaway role would reach more than the run's
// schemas on this database, through rights granted to PUBLIC.
var ErrNotConfined = errors.New("store: a claim file would not be confined on this database")

// GraderRole is one run's throwaway PostgreSQL login role and the database
// of its own it runs in (see the comment on claim files above). Its
// password lives only in this value and in the URL the run's connections
// use ([GraderRole.URL]); no report, error or argument list shows it.
type GraderRole struct {
	Name     string // outboxlab_grader_<id>
	Database string // outboxlab_grade_<id>: the run's own database
	admin    string // the URL of the login that created them, which drops them
	adminDB  string // the same login, in Database
	password string
	url      string    // the role, in Database
	lock     *pgx.Conn // holds the grade's advisory lock in admin's database until Drop
}

// Statements the lab runs as the login in --db to make and remove a grader
// role. None takes the password in clear: CREATE ROLE gets a SCRAM
// verifier, so the server's log and pg_stat_activity never hold it.
var (
	adminRightsSQL = audit("lab: can this login create roles and databases, on a server recent enough",
		`SELECT current_user, rolsuper, rolcreaterole, rolcreatedb, current_setting('server_version_num')::int, current_setting('server_version')
FROM pg_roles WHERE rolname = current_user`)
	graderLockSQL = audit("lab: hold the grade's advisory lock while its objects live, unless a session holds it in any database",
		`SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int::oid
                                 AND objid = $3::bigint::oid AND objsubid = 2 AND granted)
            THEN false ELSE pg_try_advisory_lock($1, $2) END`)
	graderUnlockSQL = audit("lab: let the grade's advisory lock go",
		"SELECT pg_advisory_unlock($1, $2)")
	graderWorkMemSQL = audit("lab: bound the memory of the role's sorts and hashes",
		"ALTER ROLE %s SET work_mem = '"+graderWorkMem+"'")
	graderTempFilesSQL = audit("lab: bound the temporary files of the role's statements (a superuser's right)",
		"ALTER ROLE %s SET temp_file_limit = '"+graderTempFileLimit+"'")
	createGradeDatabaseSQL = audit("lab: create the run's own database, from template0",
		"CREATE DATABASE %s TEMPLATE template0")
	commentGradeDatabaseSQL = audit("lab: say whose the run's database is", "COMMENT ON DATABASE %s IS %s")
	revokeGradeDatabaseSQL  = audit("lab: no one else may connect to the run's database or make temporary tables in it",
		"REVOKE ALL ON DATABASE %s FROM PUBLIC")
	grantGradeDatabaseSQL = audit("lab: let the role connect to the run's database", "GRANT CONNECT ON DATABASE %s TO %s")
	revokePublicSchemaSQL = audit("lab: the run's database's public schema is not the role's",
		"REVOKE ALL ON SCHEMA public FROM PUBLIC")
	dropGradeDatabaseSQL = audit("lab: drop the run's database", "DROP DATABASE IF EXISTS %s WITH (FORCE)")
	commentGraderSQL     = audit("lab: say whose the run's role is", "COMMENT ON ROLE %s IS %s")
	createGraderSQL      = audit("lab: create the run's throwaway login role",
		"CREATE ROLE %s LOGIN PASSWORD %s NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT %d VALID UNTIL %s")
	graderTimeoutSQL = audit("lab: bound the role's statements",
		"ALTER ROLE %s SET statement_timeout = '"+graderStatementTimeout+"'")
	graderIdleSQL = audit("lab: bound the role's open transactions",
		"ALTER ROLE %s SET idle_in_transaction_session_timeout = '"+graderIdleInTxTimeout+"'")
	graderNoJITSQL = audit("lab: compile none of the role's statements to machine code (its time would count as the statement's)",
		"ALTER ROLE %s SET jit = off")
	memberOfGraderSQL = audit("lab: let a login that is not a superuser drop what the role owns",
		"GRANT %s TO CURRENT_USER")
	grantSchemaSQL = audit("lab: give the role the run's schema",
		"GRANT USAGE, CREATE ON SCHEMA %s TO %s")
	terminateGraderSQL = audit("lab: end the role's sessions",
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()`)
	reassignGraderSQL = audit("lab: hand the kept schema's tables to the login in --db", "REASSIGN OWNED BY %s TO CURRENT_USER")
	dropOwnedSQL      = audit("lab: drop what the role owns and was granted", "DROP OWNED BY %s")
	dropGraderSQL     = audit("lab: drop the run's throwaway login role", "DROP ROLE IF EXISTS %s")
	noLoginSQL        = audit("lab: lock the role out when it cannot be dropped", "ALTER ROLE %s NOLOGIN")

	// The rights the role would have through PUBLIC, outside its own
	// schemas: creating in a schema (public before PostgreSQL 15), any
	// right on a table, view or sequence, running a SECURITY DEFINER
	// function (which runs with its owner's rights).
	creatableSchemasSQL = audit("lab: schemas the role could create in", `SELECT nspname FROM pg_namespace
WHERE has_schema_privilege($1, oid, 'CREATE') AND nspname NOT LIKE 'pg\_temp\_%' AND nspname NOT LIKE 'pg\_toast\_temp\_%'
ORDER BY nspname LIMIT 5`)
	reachableTablesSQL = audit("lab: tables the role could read or write", `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
  AND has_schema_privilege($1, n.oid, 'USAGE')
  AND has_table_privilege($1, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
ORDER BY 1 LIMIT 5`)
	definerFunctionsSQL = audit("lab: SECURITY DEFINER functions the role could run", `SELECT quote_ident(n.nspname) || '.' || quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid) || ')'
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.prosecdef AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND has_schema_privilege($1, n.oid, 'USAGE') AND has_function_privilege($1, p.oid, 'EXECUTE')
ORDER BY 1 LIMIT 5`)
	publicSequencesSQL = audit("lab: sequences PUBLIC may use", `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND CASE WHEN c.relkind = 'S' THEN has_sequence_privilege($1, c.oid, 'USAGE, SELECT, UPDATE') END
ORDER BY 1 LIMIT 5`)
	confinedSQL = audit("lab: is this login a confined role", `SELECT r.rolname, r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls,
       EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.member = r.oid)
FROM pg_roles r WHERE r.rolname = current_user`)
)

// CheckCanCreateRoles tells, before any run, whether the login in dsn may
// create a grader role and its database: it needs CREATEROLE and CREATEDB,
// or to be a superuser.
func CheckCanCreateRoles(ctx context.Context, dsn string) error {
	db, err := OpenPostgres(ctx, dsn, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = adminRights(ctx, db)
	return err
}

// adminRights reads whether the login may create roles and databases on a
// server recent enough, and whether it is a superuser.
func adminRights(ctx context.Context, db *DB) (super bool, err error) {
	var user, version string
	var createRole, createDB bool
	var versionNum int
	if err := db.sql.QueryRowContext(ctx, adminRightsSQL.SQL).Scan(&user, &super, &createRole, &createDB, &versionNum, &version); err != nil {
		return false, fmt.Errorf("store: read the login's rights: %w", err)
	}
	if versionNum < 140000 {
		return false, fmt.Errorf("%w; this server is %s", ErrServerTooOld, version)
	}
	if !super && !createRole {
		return false, fmt.Errorf("%w: %s has neither CREATEROLE nor SUPERUSER. A claim file runs on PostgreSQL as a throwaway "+
			"login role the lab creates for the run and drops afterwards, so the login in --db needs the right to create roles: "+
			"ALTER ROLE %s CREATEROLE (as a superuser), or use a login that has it", ErrCannotCreateRoles, user, pgx.Identifier{user}.Sanitize())
	}
	if !super && !createDB {
		return false, fmt.Errorf("%w: %s has neither CREATEDB nor SUPERUSER. A claim file runs on PostgreSQL in a throwaway "+
			"database the lab creates for the run and drops afterwards, so the login in --db needs the right to create databases: "+
			"ALTER ROLE %s CREATEDB (as a superuser), or use a login that has it", ErrCannotCreateDatabases, user, pgx.Identifier{user}.Sanitize())
	}
	return super, nil
}

// CreateGraderRole creates a grader role and its database as the login in
// adminDSN: it checks that PUBLIC gives no reach the role could use in
// adminDSN's database (see [GraderRole.checkConfined]), takes the grade's
// advisory lock, makes the role and the database, and checks that the
// role can log in to it. The caller grants it the run's schemas
// ([GraderRole.GrantSchema], made with [GraderRole.AdminURL]) and drops
// both on every path ([GraderRole.Drop]).
func CreateGraderRole(ctx context.Context, adminDSN string) (*GraderRole, error) {
	db, err := OpenPostgres(ctx, adminDSN, "", Config{})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	super, err := adminRights(ctx, db)
	if err != nil {
		return nil, err
	}
	if err := checkConfined(ctx, db); err != nil {
		return nil, err
	}
	secret := make([]byte, 24)
	salt := make([]byte, 16)
	for _, b := range [][]byte{secret, salt} {
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("store: random password: %w", err)
		}
	}
	r := &GraderRole{admin: adminDSN, password: hex.EncodeToString(secret)}
	if err := r.takeLock(ctx); err != nil {
		return nil, err
	}
	if r.url, err = withLogin(adminDSN, r.Name, r.password); err == nil {
		r.url, err = withDatabase(r.url, r.Database)
	}
	if err == nil {
		r.adminDB, err = withDatabase(adminDSN, r.Database)
	}
	var c *pgx.Conn // makes the role and the database
	if err == nil {
		c, err = connectAdmin(ctx, adminDSN)
	}
	if err != nil {
		r.releaseLock()
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	// undo drops what was made when making it fails, even when ctx has
	// ended (a run's timeout). A cancelled CREATE may still commit: undo
	// waits until the server is done with c's statement, then drops.
	undo := func(err error) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		defer r.releaseLock()
		if werr := waitIdle(cctx, db, c.PgConn().PID()); werr != nil {
			return errors.Join(err, werr)
		}
		return errors.Join(err, r.dropWith(cctx, db, false))
	}
	exec := func(s Stmt, sql string) error {
		if _, err := c.Exec(ctx, sql); err != nil {
			return fmt.Errorf("store: %s %s: %w", s.Name, r.Name, err)
		}
		return nil
	}
	ident := pgx.Identifier{r.Name}.Sanitize()
	until := time.Now().Add(GraderRoleLifetime).UTC().Format("2006-01-02 15:04:05+00")
	// The role and its comment (whose it is) commit together: one
	// simple-protocol text runs in one transaction.
	host, _ := os.Hostname()
	about := fmt.Sprintf("outboxlab: the role of one grade, by process %d on %s from %s; dropped when it ends, or by a later grade once that process is gone",
		os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	create := fmt.Sprintf(createGraderSQL.SQL, ident, quoteLiteral(scramVerifier(r.password, salt)), GraderRoleConnectionLimit, quoteLiteral(until)) +
		";\n" + fmt.Sprintf(commentGraderSQL.SQL, ident, quoteLiteral(about))
	if err := exec(createGraderSQL, create); err != nil {
		return nil, undo(err)
	}
	for _, s := range []Stmt{graderTimeoutSQL, graderIdleSQL, graderWorkMemSQL, graderNoJITSQL} {
		if err := exec(s, fmt.Sprintf(s.SQL, ident)); err != nil {
			return nil, undo(err)
		}
	}
	if super {
		if err := exec(graderTempFilesSQL, fmt.Sprintf(graderTempFilesSQL.SQL, ident)); err != nil {
			return nil, undo(err)
		}
	} else {
		// Best effort: without the membership, DROP OWNED BY and REASSIGN
		// OWNED BY are refused, but DROP ROLE still succeeds once the
		// run's database, and with it all the role made, is dropped;
		// only a role of a --keep-db run is then left, locked (NOLOGIN).
		_ = exec(memberOfGraderSQL, fmt.Sprintf(memberOfGraderSQL.SQL, ident))
	}
	if err := r.createDatabase(ctx, c); err != nil {
		return nil, undo(err)
	}
	if err := r.checkLogin(ctx); err != nil {
		return nil, undo(err)
	}
	return r, nil
}

// connectAdmin is one connection as the login in dsn, in its database.
func connectAdmin(ctx context.Context, dsn string) (*pgx.Conn, error) {
	pc, err := postgresConfig(dsn, "")
	if err != nil {
		return nil, err
	}
	c, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, unreachable(dsn, err)
	}
	return c, nil
}

var backendActiveSQL = audit("lab: is a cancelled statement still running",
	"SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle'")

// waitIdle waits until backend pid runs no statement (or is gone), so
// what a cancelled statement did is final.
func waitIdle(ctx context.Context, db *DB, pid uint32) error {
	for {
		var n int
		if err := db.sql.QueryRowContext(ctx, backendActiveSQL.SQL, pid).Scan(&n); err != nil {
			return fmt.Errorf("store: %s: %w", backendActiveSQL.Name, err)
		}
		if n == 0 {
			return nil
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("store: backend %d still runs a cancelled statement: %w", pid, err)
		}
	}
}

// takeLock picks the grade's id and takes its advisory lock on a
// connection of its own to the admin's database, kept open (with no idle
// timeout) until Drop: the lock says the grade lives. An id whose lock is held (another grade,
// or a sweep removing a dead one's objects) is not taken.
func (r *GraderRole) takeLock(ctx context.Context) error {
	pc, err := postgresConfig(r.admin, "")
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	pc.RuntimeParams["application_name"] = fmt.Sprintf("outboxlab grade (pid %d on %s)", os.Getpid(), host)
	// The connection idles for the whole grade: a server, role or URL
	// that ends idle sessions must not end this one, or the lock goes and
	// a concurrent sweep drops a live grade's role and database. Startup
	// parameters win over the role's and the database's settings
	// (PostgreSQL 14 and later have both; adminRights refused older).
	for _, p := range lockConnIdleParams {
		pc.RuntimeParams[p] = "0"
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return unreachable(r.admin, err)
	}
	for range 8 {
		var id [4]byte
		if _, err := rand.Read(id[:]); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("store: random grade id: %w", err)
		}
		var locked bool
		if err := conn.QueryRow(ctx, graderLockSQL.SQL, graderLockSpace, lockKey(id), int64(uint32(lockKey(id)))).Scan(&locked); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("store: %s: %w", graderLockSQL.Name, err)
		}
		if locked {
			r.Name, r.Database, r.lock = graderRolePrefix+hex.EncodeToString(id[:]), graderDatabasePrefix+hex.EncodeToString(id[:]), conn
			return nil
		}
	}
	conn.Close(ctx)
	return errors.New("store: no free grade id: eight random ids were all locked")
}

// lockConnIdleParams are the server's timeouts for an idle session (or
// an idle open transaction) that the lock's connection turns off.
var lockConnIdleParams = []string{"idle_session_timeout", "idle_in_transaction_session_timeout"}

// lockKey is the second key of a grade's advisory lock: its id.
func lockKey(id [4]byte) int32 { return int32(binary.BigEndian.Uint32(id[:])) }

// releaseLock ends the lock's connection, and so the lock.
func (r *GraderRole) releaseLock() {
	if r.lock != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		r.lock.Close(ctx)
		r.lock = nil
	}
}

// createDatabase makes the run's database from template0 on c, lets the
// role connect to it and no one else but its owner, and takes its public
// schema from PUBLIC.
func (r *GraderRole) createDatabase(ctx context.Context, c *pgx.Conn) error {
	dbIdent, roleIdent := pgx.Identifier{r.Database}.Sanitize(), pgx.Identifier{r.Name}.Sanitize()
	host, _ := os.Hostname()
	about := fmt.Sprintf("outboxlab: the database of one grade, run as role %s by process %d on %s from %s; dropped when it ends, or by a later grade once that process is gone",
		r.Name, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	for _, q := range []struct {
		s   Stmt
		sql string
	}{
		{createGradeDatabaseSQL, fmt.Sprintf(createGradeDatabaseSQL.SQL, dbIdent)},
		{commentGradeDatabaseSQL, fmt.Sprintf(commentGradeDatabaseSQL.SQL, dbIdent, quoteLiteral(about))},
		{revokeGradeDatabaseSQL, fmt.Sprintf(revokeGradeDatabaseSQL.SQL, dbIdent)},
		{grantGradeDatabaseSQL, fmt.Sprintf(grantGradeDatabaseSQL.SQL, dbIdent, roleIdent)},
	} {
		if _, err := c.Exec(ctx, q.sql); err != nil {
			return fmt.Errorf("store: %s %s: %w", q.s.Name, r.Database, err)
		}
	}
	in, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := in.sql.ExecContext(ctx, revokePublicSchemaSQL.SQL); err != nil {
		return fmt.Errorf("store: %s in %s: %w", revokePublicSchemaSQL.Name, r.Database, err)
	}
	return checkConfined(ctx, in)
}

// cleanupTimeout bounds dropping a grader role after its run's context
// has ended.
const cleanupTimeout = 30 * time.Second

// URL is the URL the run's connections use: the server of the login in
// --db and the run's own database, logging in as the role with its
// password. Never print it; [RedactURL] hides the password.
func (r *GraderRole) URL() string { return r.url }

// AdminURL is the login in --db's URL in the run's own database, where the
// lab makes the run's schemas.
func (r *GraderRole) AdminURL() string { return r.adminDB }

// GrantSchema gives the role USAGE and CREATE on schema, one of the run's,
// in the run's database.
func (r *GraderRole) GrantSchema(ctx context.Context, schema string) error {
	db, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	q := fmt.Sprintf(grantSchemaSQL.SQL, pgx.Identifier{schema}.Sanitize(), pgx.Identifier{r.Name}.Sanitize())
	if _, err := db.sql.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("store: %s %s to %s: %w", grantSchemaSQL.Name, schema, r.Name, err)
	}
	return nil
}

// Disconnect ends every session of the role still open (a child process
// killed mid-transaction leaves one until the server notices), so the
// run's schemas can be dropped without waiting on its locks.
func (r *GraderRole) Disconnect(ctx context.Context) error {
	db, err := OpenPostgres(ctx, r.admin, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	if err := db.sql.QueryRowContext(ctx, terminateGraderSQL.SQL, r.Name).Scan(&n); err != nil {
		return fmt.Errorf("store: %s %s: %w", terminateGraderSQL.Name, r.Name, err)
	}
	return nil
}

// Drop removes the role and its database, then lets the grade's lock go.
// With keep, the database stays (run --keep-db): what the role created in
// it is first handed to the login in --db, and its comment says it was
// kept, so no sweep takes it; no login role outlives the run either way.
// When the role cannot be dropped, it is at least locked out (NOLOGIN),
// and the error names it; a later grade sweeps what is left.
func (r *GraderRole) Drop(ctx context.Context, keep bool) error {
	defer r.releaseLock()
	db, err := OpenPostgres(ctx, r.admin, "", Config{})
	if err != nil {
		return fmt.Errorf("store: drop role %s and database %s (a later grade removes them): %w", r.Name, r.Database, err)
	}
	defer db.Close()
	return r.dropWith(ctx, db, keep)
}

func (r *GraderRole) dropWith(ctx context.Context, db *DB, keep bool) error {
	var errs []error
	if keep {
		errs = append(errs, r.keepDatabase(ctx, db))
	} else if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(dropGradeDatabaseSQL.SQL, pgx.Identifier{r.Database}.Sanitize())); err != nil {
		errs = append(errs, fmt.Errorf("store: %s %s: %w", dropGradeDatabaseSQL.Name, r.Database, err))
	}
	return errors.Join(append(errs, dropRole(ctx, db, r.Name, false))...)
}

// keepDatabase hands what the role made in the run's database to the
// login in --db and marks the database kept.
func (r *GraderRole) keepDatabase(ctx context.Context, db *DB) error {
	in, err := OpenPostgres(ctx, r.adminDB, "", Config{})
	if err != nil {
		return err
	}
	defer in.Close()
	ident := pgx.Identifier{r.Name}.Sanitize()
	var errs []error
	for _, s := range []Stmt{reassignGraderSQL, dropOwnedSQL} {
		if _, err := in.sql.ExecContext(ctx, fmt.Sprintf(s.SQL, ident)); err != nil {
			errs = append(errs, fmt.Errorf("store: %s in %s: %w", s.Name, r.Database, err))
		}
	}
	about := fmt.Sprintf("%s on %s; drop it with DROP DATABASE %s", keptComment, time.Now().UTC().Format(time.RFC3339), pgx.Identifier{r.Database}.Sanitize())
	if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(commentGradeDatabaseSQL.SQL, pgx.Identifier{r.Database}.Sanitize(), quoteLiteral(about))); err != nil {
		errs = append(errs, fmt.Errorf("store: %s %s: %w", commentGradeDatabaseSQL.Name, r.Database, err))
	}
	return errors.Join(errs...)
}

// dropRole drops role name and what it owns in db's database (and its
// rights on shared objects, the run's database among them). A role that
// cannot be dropped is locked out (NOLOGIN) and named in the error.
func dropRole(ctx context.Context, db *DB, name string, swept bool) error {
	ident := pgx.Identifier{name}.Sanitize()
	var errs []error
	for _, s := range []Stmt{dropOwnedSQL, dropGraderSQL} {
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(s.SQL, ident)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
		}
	}
	if exists, err := roleExists(ctx, db, name); err != nil || !exists {
		return err // dropped: an earlier step's failure did not matter
	}
	if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(noLoginSQL.SQL, ident)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", noLoginSQL.Name, err))
	}
	later := "a later grade tries again"
	if swept {
		later = "it expires by itself within " + GraderRoleLifetime.String()
	}
	return fmt.Errorf("store: role %s could not be dropped (%s; drop it with DROP OWNED BY %s; DROP ROLE %s): %w",
		name, later, ident, ident, errors.Join(errs...))
}

func roleExists(ctx context.Context, db *DB, name string) (bool, error) {
	var n int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", name).Scan(&n); err != nil {
		return false, fmt.Errorf("store: look up role %s: %w", name, err)
	}
	return n == 1, nil
}

// checkConfined refuses a database where PUBLIC, and so a grader role,
// holds a right outside the run's schemas that a claim file could use: to
// create objects in a shared schema (where another login's search path
// could find them), to read or write a table, to use a sequence (nextval
// moves it for everyone), or to run a function with its owner's rights.
// The run's own database makes these unreachable from a claim file; the
// check refuses a server that relies on that alone.
func checkConfined(ctx context.Context, db *DB) error {
	for _, c := range []struct {
		s    Stmt
		what string
		fix  string
	}{
		{creatableSchemasSQL, "create objects in schema", "REVOKE CREATE ON SCHEMA ... FROM PUBLIC (PostgreSQL 15 and later do so for public)"},
		{reachableTablesSQL, "read or write", "REVOKE ALL ON ... FROM PUBLIC"},
		{publicSequencesSQL, "use the sequence", "REVOKE ALL ON SEQUENCE ... FROM PUBLIC"},
		{definerFunctionsSQL, "run the SECURITY DEFINER function", "REVOKE EXECUTE ON FUNCTION ... FROM PUBLIC"},
	} {
		names, err := strings1(ctx, db, c.s.SQL, "public")
		if err != nil {
			return fmt.Errorf("store: %s: %w", c.s.Name, err)
		}
		if len(names) > 0 {
			return fmt.Errorf("%w: every login, through PUBLIC, may %s %s, and so could a claim file; %s, or point --db at a database of the lab's own",
				ErrNotConfined, c.what, strings.Join(names, ", "), c.fix)
		}
	}
	return nil
}

// strings1 is the first column of every row of query.
func strings1(ctx context.Context, db *DB, query string, args ...any) ([]string, error) {
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// checkLogin logs in as the role once, so a server whose pg_hba.conf
// refuses it says so before the run, and checks what it logged in as.
func (r *GraderRole) checkLogin(ctx context.Context) error {
	pc, err := postgresConfig(r.url, "")
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "28000" || pe.Code == "28P01") {
			return fmt.Errorf("%w: %s (SQLSTATE %s). A claim file runs on PostgreSQL as a throwaway login role with a "+
				"password, so pg_hba.conf must accept password (scram-sha-256 or md5) or trust logins for any role from "+
				"this client to database %s, e.g. `host %s all 127.0.0.1/32 scram-sha-256`; peer and cert logins cannot serve it",
				ErrGraderLoginRefused, pe.Message, pe.Code, pc.Database, pc.Database)
		}
		return unreachable(r.url, err)
	}
	defer conn.Close(ctx)
	return confined(ctx, func(dest ...any) error { return conn.QueryRow(ctx, confinedSQL.SQL).Scan(dest...) })
}

// confined checks the login a connection uses is a confined role: no
// attribute beyond LOGIN, no membership, so a claim file gains nothing by
// SET ROLE or set_config('role', ...).
func confined(ctx context.Context, scan func(dest ...any) error) error {
	var name string
	var privileged, member bool
	if err := scan(&name, &privileged, &member); err != nil {
		return fmt.Errorf("store: read the connection's role: %w", err)
	}
	if privileged || member {
		return fmt.Errorf("store: a claim file runs on PostgreSQL only as a confined login role (no SUPERUSER, CREATEROLE, "+
			"CREATEDB, REPLICATION or BYPASSRLS, a member of no role); this connection logs in as %s", name)
	}
	return nil
}

// checkConfinedConn is [confined] on a database/sql connection pool.
func checkConfinedConn(ctx context.Context, sdb *sql.DB) error {
	return confined(ctx, func(dest ...any) error { return sdb.QueryRowContext(ctx, confinedSQL.SQL).Scan(dest...) })
}

// withDatabase is dsn in database name: the same server, login and
// options.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("store: %s: %w", RedactURL(dsn), err)
	}
	q := u.Query()
	q.Del("dbname")
	q.Del("database")
	u.RawQuery = q.Encode()
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// withLogin is dsn logging in as user with password: the same server,
// port, database and options, the user and password replaced wherever the
// URL gave them.
func withLogin(dsn, user, password string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("store: %s: %w", RedactURL(dsn), err)
	}
	q := u.Query()
	q.Del("user")
	q.Del("password")
	u.RawQuery = q.Encode()
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}

// scramVerifier is what PostgreSQL stores for password under
// SCRAM-SHA-256 (RFC 5802, 7677), so CREATE ROLE never sends the password
// itself: SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>.
func scramVerifier(password string, salt []byte) string {
	const iterations = 4096
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		panic("store: pbkdf2: " + err.Error()) // only for FIPS-refused parameters, which these are not
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key")))
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// CheckGraderServer tells, before any run, whether claim files can run on
// the server at dsn: the login may create roles and databases, a fresh
// role can log in to a fresh database, and PUBLIC gives it no reach
// outside its schemas. It creates one grader role and database and drops
// them again.
func CheckGraderServer(ctx context.Context, dsn string) error {
	r, err := CreateGraderRole(ctx, dsn)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	return r.Drop(cctx, false)
}
