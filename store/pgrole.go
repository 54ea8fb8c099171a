package store

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A claim file is untrusted input. On SQLite an authorizer confines it
// (see [CheckClaimFile]); on PostgreSQL the server's own privileges do:
// each run that takes a claim file gets a [GraderRole], a fresh login role
// with no attribute and no membership, allowed USAGE and CREATE on the
// run's schemas and nothing else, and every connection of the run (its
// migrations, seeding, workers and child processes) logs in as that role.
// A statement of the file can then at worst touch the run's throwaway
// schema: it cannot read or write another schema's tables, create
// anything outside the run's schemas, read server files or run programs
// (pg_read_file, COPY ... TO PROGRAM, lo_export need a superuser or a
// pg_* role), and SET ROLE or set_config('role', ...) can only switch to a
// role it is a member of, which is none.

// GraderRoleConnectionLimit is the most connections a grader role may hold
// at once: a session 15 run uses a handful, its child processes one each.
const GraderRoleConnectionLimit = 24

// GraderRoleLifetime is how long a grader role can log in at all (VALID
// UNTIL): a role a killed lab could not drop expires by itself.
const GraderRoleLifetime = 24 * time.Hour

// Session defaults of a grader role (ALTER ROLE ... SET): a backstop for a
// statement the lab does not bound itself, and for a transaction left open.
const (
	graderStatementTimeout = "30s"
	graderIdleInTxTimeout  = "60s"
)

// ErrCannotCreateRoles means the login in --db may not create the
// throwaway role a claim file runs as.
var ErrCannotCreateRoles = errors.New("store: this login cannot create roles")

// ErrGraderLoginRefused means the server would not let the throwaway role
// log in (pg_hba.conf).
var ErrGraderLoginRefused = errors.New("store: the server refused the throwaway role's login")

// ErrNotConfined means the throwaway role would reach more than the run's
// schemas on this database, through rights granted to PUBLIC.
var ErrNotConfined = errors.New("store: a claim file would not be confined on this database")

// GraderRole is one run's throwaway PostgreSQL login role (see the package
// comment on claim files above). Its password lives only in this value and
// in the URL the run's connections use ([GraderRole.URL]); no report,
// error or argument list shows it.
type GraderRole struct {
	Name     string // outboxlab_grader_<random>
	admin    string // the URL of the login that created it, which drops it
	password string
	url      string
}

// Statements the lab runs as the login in --db to make and remove a grader
// role. None takes the password in clear: CREATE ROLE gets a SCRAM
// verifier, so the server's log and pg_stat_activity never hold it.
var (
	adminRightsSQL = audit("lab: can this login create roles",
		`SELECT current_user, rolsuper, rolcreaterole FROM pg_roles WHERE rolname = current_user`)
	createGraderSQL = audit("lab: create the run's throwaway login role",
		"CREATE ROLE %s LOGIN PASSWORD %s NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT %d VALID UNTIL %s")
	graderTimeoutSQL = audit("lab: bound the role's statements",
		"ALTER ROLE %s SET statement_timeout = '"+graderStatementTimeout+"'")
	graderIdleSQL = audit("lab: bound the role's open transactions",
		"ALTER ROLE %s SET idle_in_transaction_session_timeout = '"+graderIdleInTxTimeout+"'")
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
	confinedSQL = audit("lab: is this login a confined role", `SELECT r.rolname, r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls,
       EXISTS (SELECT 1 FROM pg_auth_members m WHERE m.member = r.oid)
FROM pg_roles r WHERE r.rolname = current_user`)
)

// CheckCanCreateRoles tells, before any run, whether the login in dsn may
// create a grader role: it needs CREATEROLE or to be a superuser.
func CheckCanCreateRoles(ctx context.Context, dsn string) error {
	db, err := OpenPostgres(ctx, dsn, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = adminRights(ctx, db)
	return err
}

// adminRights reads whether the login may create roles, and whether it is
// a superuser.
func adminRights(ctx context.Context, db *DB) (super bool, err error) {
	var user string
	var createRole bool
	if err := db.sql.QueryRowContext(ctx, adminRightsSQL.SQL).Scan(&user, &super, &createRole); err != nil {
		return false, fmt.Errorf("store: read the login's rights: %w", err)
	}
	if !super && !createRole {
		return false, fmt.Errorf("%w: %s has neither CREATEROLE nor SUPERUSER. A claim file runs on PostgreSQL as a throwaway "+
			"login role the lab creates for the run and drops afterwards, so the login in --db needs the right to create roles: "+
			"ALTER ROLE %s CREATEROLE (as a superuser), or use a login that has it", ErrCannotCreateRoles, user, pgx.Identifier{user}.Sanitize())
	}
	return super, nil
}

// CreateGraderRole creates a grader role as the login in adminDSN, checks
// that it can log in and that PUBLIC gives it no reach outside the schemas
// it will be granted, and returns it. The caller grants it the run's
// schemas ([GraderRole.GrantSchema]) and drops it on every path
// ([GraderRole.Drop]).
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
	var id [4]byte
	secret := make([]byte, 24)
	salt := make([]byte, 16)
	for _, b := range [][]byte{id[:], secret, salt} {
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("store: random role name or password: %w", err)
		}
	}
	r := &GraderRole{Name: "outboxlab_grader_" + hex.EncodeToString(id[:]), admin: adminDSN, password: hex.EncodeToString(secret)}
	if r.url, err = withLogin(adminDSN, r.Name, r.password); err != nil {
		return nil, err
	}
	// undo drops the role when making it fails, even when ctx has ended
	// (a run's timeout): a cancelled CREATE ROLE may have committed.
	undo := func(err error) error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		return errors.Join(err, r.dropWith(cctx, db, false))
	}
	ident := pgx.Identifier{r.Name}.Sanitize()
	until := time.Now().Add(GraderRoleLifetime).UTC().Format("2006-01-02 15:04:05+00")
	create := fmt.Sprintf(createGraderSQL.SQL, ident, quoteLiteral(scramVerifier(r.password, salt)), GraderRoleConnectionLimit, quoteLiteral(until))
	if _, err := db.sql.ExecContext(ctx, create); err != nil {
		return nil, undo(fmt.Errorf("store: %s %s: %w", createGraderSQL.Name, r.Name, err))
	}
	for _, s := range []Stmt{graderTimeoutSQL, graderIdleSQL} {
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(s.SQL, ident)); err != nil {
			return nil, undo(fmt.Errorf("store: %s %s: %w", s.Name, r.Name, err))
		}
	}
	if !super {
		// Best effort: without the membership, DROP OWNED BY and REASSIGN
		// OWNED BY are refused, but DROP ROLE still succeeds once the
		// run's schemas, and with them all the role made, are dropped;
		// only a role of a --keep-db run is then left, locked (NOLOGIN).
		_, _ = db.sql.ExecContext(ctx, fmt.Sprintf(memberOfGraderSQL.SQL, ident))
	}
	if err := r.checkConfined(ctx, db); err != nil {
		return nil, undo(err)
	}
	if err := r.checkLogin(ctx); err != nil {
		return nil, undo(err)
	}
	return r, nil
}

// cleanupTimeout bounds dropping a grader role after its run's context
// has ended.
const cleanupTimeout = 30 * time.Second

// URL is the URL the run's connections use: the server and database of
// the login in --db, logging in as the role with its password. Never print
// it; [RedactURL] hides the password.
func (r *GraderRole) URL() string { return r.url }

// GrantSchema gives the role USAGE and CREATE on schema, one of the run's.
func (r *GraderRole) GrantSchema(ctx context.Context, schema string) error {
	db, err := OpenPostgres(ctx, r.admin, "", Config{})
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

// Drop removes the role. With keptSchemas, the run's schemas stay (run
// --keep-db): what the role created in them is first handed to the login
// in --db, so no login role outlives the run either way. When the role
// cannot be dropped, it is at least locked out (NOLOGIN), and the error
// names it.
func (r *GraderRole) Drop(ctx context.Context, keptSchemas bool) error {
	db, err := OpenPostgres(ctx, r.admin, "", Config{})
	if err != nil {
		return fmt.Errorf("store: drop role %s (it expires by itself within %s): %w", r.Name, GraderRoleLifetime, err)
	}
	defer db.Close()
	return r.dropWith(ctx, db, keptSchemas)
}

func (r *GraderRole) dropWith(ctx context.Context, db *DB, keptSchemas bool) error {
	ident := pgx.Identifier{r.Name}.Sanitize()
	steps := []Stmt{dropOwnedSQL, dropGraderSQL}
	if keptSchemas {
		steps = append([]Stmt{reassignGraderSQL}, steps...)
	}
	var errs []error
	for _, s := range steps {
		if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(s.SQL, ident)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
		}
	}
	if exists, err := roleExists(ctx, db, r.Name); err != nil || !exists {
		return err // dropped: an earlier step's failure did not matter
	}
	if _, err := db.sql.ExecContext(ctx, fmt.Sprintf(noLoginSQL.SQL, ident)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", noLoginSQL.Name, err))
	}
	return fmt.Errorf("store: role %s could not be dropped (it expires by itself within %s; drop it with DROP OWNED BY %s; DROP ROLE %s): %w",
		r.Name, GraderRoleLifetime, ident, ident, errors.Join(errs...))
}

func roleExists(ctx context.Context, db *DB, name string) (bool, error) {
	var n int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", name).Scan(&n); err != nil {
		return false, fmt.Errorf("store: look up role %s: %w", name, err)
	}
	return n == 1, nil
}

// checkConfined refuses a database where PUBLIC, and so the role, holds a
// right outside the run's schemas that a claim file could use: to create
// objects in a shared schema (where another login's search path could
// find them), to read or write a table, or to run a function with its
// owner's rights. The role has no schema of its own yet.
func (r *GraderRole) checkConfined(ctx context.Context, db *DB) error {
	for _, c := range []struct {
		s    Stmt
		what string
		fix  string
	}{
		{creatableSchemasSQL, "create objects in schema", "REVOKE CREATE ON SCHEMA ... FROM PUBLIC (PostgreSQL 15 and later do so for public)"},
		{reachableTablesSQL, "read or write", "REVOKE ALL ON ... FROM PUBLIC"},
		{definerFunctionsSQL, "run the SECURITY DEFINER function", "REVOKE EXECUTE ON FUNCTION ... FROM PUBLIC"},
	} {
		names, err := strings1(ctx, db, c.s.SQL, r.Name)
		if err != nil {
			return fmt.Errorf("store: %s: %w", c.s.Name, err)
		}
		if len(names) > 0 {
			return fmt.Errorf("%w: every login, through PUBLIC, may %s %s, and so could a claim file; %s, or give the lab a database of its own",
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
// the server at dsn: the login may create roles, a fresh role can log in,
// and PUBLIC gives it no reach outside its schemas. It creates one grader
// role and drops it again.
func CheckGraderServer(ctx context.Context, dsn string) error {
	r, err := CreateGraderRole(ctx, dsn)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	return r.Drop(cctx, false)
}
