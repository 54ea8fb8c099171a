package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrUnreachable means a PostgreSQL server could not be reached or refused
// the connection; the error wraps the server's (or the network's) reason.
var ErrUnreachable = errors.New("store: cannot reach the PostgreSQL server")

// ConnectTimeout is how long opening a PostgreSQL connection may take when
// the URL sets no connect_timeout: an unreachable server is reported in
// seconds, not after the operating system gives up.
const ConnectTimeout = 5 * time.Second

// PostgreSQL error codes the lab tells apart (SQLSTATE).
const (
	pgSerializationFailure = "40001"
	pgDeadlockDetected     = "40P01"
	pgLockNotAvailable     = "55P03"
)

// IsPostgresURL reports whether dsn names a PostgreSQL server rather than
// an SQLite file.
func IsPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// RedactURL returns the URL without its password, for reports and errors.
func RedactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(a PostgreSQL URL that does not parse)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// OpenPostgres opens one application instance's connection to the
// PostgreSQL server at dsn, with schema first on its search path, so the
// lesson's unqualified table names are the run's own tables. Write
// transactions run at READ COMMITTED, PostgreSQL's default; a claim that
// must not race takes a row lock (SELECT ... FOR UPDATE). Every statement
// is written in the lesson's SQLite text and numbered for PostgreSQL at
// the driver, where the ledger records the text that ran.
func OpenPostgres(ctx context.Context, dsn, schema string, cfg Config) (*DB, error) {
	pc, err := postgresConfig(dsn, schema)
	if err != nil {
		return nil, err
	}
	db, err := openPostgres(ctx, dsn, stdlib.GetConnector(*pc), cfg)
	if err != nil {
		return nil, err
	}
	db.schema = schema
	return db, nil
}

// CheckServer reports whether the server at dsn accepts a connection, with
// the server's own reason when it does not.
func CheckServer(ctx context.Context, dsn string) error {
	db, err := OpenPostgres(ctx, dsn, "", Config{})
	if err != nil {
		return err
	}
	return db.Close()
}

// postgresConfig parses dsn and sets what every lab connection has: a
// connect timeout, the schema first on the search path, and its name.
func postgresConfig(dsn, schema string) (*pgx.ConnConfig, error) {
	pc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", RedactURL(dsn), err)
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = ConnectTimeout
	}
	if schema != "" {
		pc.RuntimeParams["search_path"] = schema
	}
	pc.RuntimeParams["application_name"] = "outboxlab"
	return pc, nil
}

// openPostgres wraps connector with the ledger and the dialect, and checks
// that the server answers.
func openPostgres(ctx context.Context, dsn string, connector driver.Connector, cfg Config) (*DB, error) {
	if cfg.Ledger != nil {
		connector = &recordingConnector{base: connector, ledger: cfg.Ledger}
	}
	connector = &dialectConnector{base: connector, file: cfg.SlotFile}
	if cfg.SlotFile != nil {
		// The server's privileges confine a slot file (see [GraderRole]);
		// this wrapper only bounds its statements' time and names their
		// errors as the file's.
		connector = &pgSlotConnector{base: connector, file: cfg.SlotFile}
	}
	sdb := oneConnection(connector)
	db := &DB{sql: sdb, ledger: cfg.Ledger, onBusy: cfg.OnBusy, engine: Postgres, program: cfg.Program}
	var one int
	if err := sdb.QueryRowContext(ctx, pingSQL.SQL).Scan(&one); err != nil {
		sdb.Close()
		return nil, unreachable(dsn, err)
	}
	if cfg.SlotFile != nil {
		// A slot file never runs with the rights of the login in --db,
		// here or in a child process: only as a grader role.
		if err := checkConfinedConn(ctx, sdb); err != nil {
			sdb.Close()
			return nil, err
		}
	}
	return db, nil
}

// Server is a PostgreSQL server one run uses, with a pool of connections
// for each of the run's schemas. Each [DB] it opens still holds one
// connection of its own, as an application instance does; when the
// instance closes, its connection goes back to the pool for the next
// instance, the way PgBouncer hands connections to processes, instead of a
// new server process being started for it (about 20 ms each). A
// connection closed in the middle of a transaction, as a crash leaves it,
// is not reused: the pool closes it, and the server rolls back.
type Server struct {
	dsn   string
	mu    sync.Mutex
	pools map[string]*pgxpool.Pool
	fresh bool // see NewFreshServer
}

// NewServer returns the server at dsn; it connects on first Open.
func NewServer(dsn string) *Server { return &Server{dsn: dsn, pools: map[string]*pgxpool.Pool{}} }

// NewFreshServer is [NewServer] for a user's program's connections: a
// connection closed is closed on the server too, never handed to the next
// instance, so what a session holds (an advisory lock, a setting) dies
// with the instance, as its connection would with its process.
func NewFreshServer(dsn string) *Server {
	s := NewServer(dsn)
	s.fresh = true
	return s
}

// Open opens one application instance's connection with schema first on
// its search path (see [OpenPostgres]).
func (s *Server) Open(ctx context.Context, schema string, cfg Config) (*DB, error) {
	pool, err := s.pool(schema)
	if err != nil {
		return nil, err
	}
	db, err := openPostgres(ctx, s.dsn, stdlib.GetPoolConnector(pool), cfg)
	if err != nil {
		return nil, err
	}
	db.schema = schema
	return db, nil
}

func (s *Server) pool(schema string) (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pools[schema]; ok {
		return p, nil
	}
	pc, err := postgresConfig(s.dsn, schema)
	if err != nil {
		return nil, err
	}
	config, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	config.ConnConfig = pc
	config.MaxConns = 32
	if s.fresh {
		config.AfterRelease = func(*pgx.Conn) bool { return false } // destroy, do not reuse
	}
	p, err := pgxpool.NewWithConfig(context.Background(), config)
	if err != nil {
		return nil, unreachable(s.dsn, err)
	}
	s.pools[schema] = p
	return p, nil
}

// Close closes every pooled connection; open a DB no more afterwards.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for schema, p := range s.pools {
		p.Close()
		delete(s.pools, schema)
	}
}

var pingSQL = audit("lab: check the server answers", "SELECT 1")

// unreachable wraps a failure to connect with the server's own reason.
func unreachable(dsn string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w at %s: %s (SQLSTATE %s)", ErrUnreachable, RedactURL(dsn), pe.Message, pe.Code)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, RedactURL(dsn), ce.Unwrap())
	}
	return fmt.Errorf("%w at %s: %v", ErrUnreachable, RedactURL(dsn), err)
}

// pgCode is the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// pgRetryable reports the PostgreSQL errors that, like SQLITE_BUSY, mean
// "another transaction was in the way; run yours again": a serialization
// failure, a deadlock victim, a lock not available.
func pgRetryable(err error) bool {
	switch pgCode(err) {
	case pgSerializationFailure, pgDeadlockDetected, pgLockNotAvailable:
		return true
	}
	return false
}

// Schemas: each PostgreSQL run gets a schema of its own on the server.
var (
	createSchemaSQL = audit("lab: create the run's schema", "CREATE SCHEMA IF NOT EXISTS %s")
	dropSchemaSQL   = audit("lab: drop the run's schema", "DROP SCHEMA IF EXISTS %s CASCADE")
	pgSchemaSQL     = audit("lab: read the schema back for the report (PostgreSQL's catalog)", `SELECT c.relname,
       'CREATE ' || CASE c.relkind WHEN 'r' THEN 'TABLE' ELSE 'INDEX' END || ' ' || c.relname || CASE c.relkind
         WHEN 'r' THEN ' (' || (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
                 CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY a.attnum)
               FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) || ')'
         ELSE '' END,
       c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'r'
ORDER BY c.oid`)
	pgIndexesSQL = audit("lab: read the indexes back for the report",
		`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`)
)

// CreateSchema creates schema on the server at dsn (a run's own tables).
func CreateSchema(ctx context.Context, dsn, schema string, cfg Config) error {
	return schemaDDL(ctx, dsn, schema, createSchemaSQL, cfg)
}

// DropSchema drops schema and everything in it.
func DropSchema(ctx context.Context, dsn, schema string, cfg Config) error {
	return schemaDDL(ctx, dsn, schema, dropSchemaSQL, cfg)
}

func schemaDDL(ctx context.Context, dsn, schema string, s Stmt, cfg Config) error {
	db, err := OpenPostgres(ctx, dsn, "", Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.sql.ExecContext(ctx, fmt.Sprintf(s.SQL, pgx.Identifier{schema}.Sanitize()))
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", s.Name, schema, err)
	}
	return nil
}

// postgresSchema is [DB.Schema] on PostgreSQL: each table with its columns
// as the catalog holds them, then each index's definition.
func (db *DB) postgresSchema(ctx context.Context) ([]string, error) {
	var out []string
	rows, err := db.sql.QueryContext(ctx, pgSchemaSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: read schema: %w", err)
	}
	for rows.Next() {
		var name, def, kind string
		if err := rows.Scan(&name, &def, &kind); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: read schema: %w", err)
		}
		out = append(out, def)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.sql.QueryContext(ctx, pgIndexesSQL.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: read indexes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var def string
		if err := rows.Scan(&def); err != nil {
			return nil, fmt.Errorf("store: read indexes: %w", err)
		}
		out = append(out, def)
	}
	return out, rows.Err()
}

// dialectConnector turns the lesson's statements into PostgreSQL's: a
// text the catalogue knows runs as its PostgreSQL form ([Stmt.Text]), any
// other text with its parameters numbered; :name arguments are bound in
// the order the numbers want. It sits outside the ledger's connector, so
// the ledger records the text the server ran. A slot file's statement
// runs as written, even where its text is a lesson statement's whose
// PostgreSQL form differs (a file that copies the lesson's SQLite claim
// runs without the lesson's row lock): what the file says is what runs.
type dialectConnector struct {
	base driver.Connector
	file *SlotFile // the run's slot file, or nil
}

func (c *dialectConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &dialectConn{connBase{conn}, c.file}, nil
}

func (c *dialectConnector) Driver() driver.Driver { return c.base.Driver() }

// translation is one statement text in PostgreSQL's form.
type translation struct {
	text   string
	params []string
}

var translations, verbatims sync.Map // text -> translation

// translate returns text as PostgreSQL runs it.
func translate(text string) translation {
	if t, ok := translations.Load(text); ok {
		return t.(translation)
	}
	src := text
	if s, ok := catalogue[text]; ok && s.Postgres != "" {
		src = s.Postgres
	}
	out, params := numberParams(src)
	t := translation{text: out, params: params}
	translations.Store(text, t)
	return t
}

// runsOnPostgres is the text PostgreSQL runs for s: the catalogue's
// PostgreSQL form of a lesson statement, a slot file's statement (one the
// catalogue does not name so) as written.
func runsOnPostgres(s Stmt) string {
	if c, ok := catalogue[s.SQL]; ok && c.Name == s.Name {
		return translate(s.SQL).text
	}
	return translateVerbatim(s.SQL).text
}

// translateVerbatim returns text as PostgreSQL runs it when it is a slot
// file's: as written, its parameters numbered.
func translateVerbatim(text string) translation {
	if t, ok := verbatims.Load(text); ok {
		return t.(translation)
	}
	out, params := numberParams(text)
	t := translation{text: out, params: params}
	verbatims.Store(text, t)
	return t
}

type dialectConn struct {
	connBase
	file *SlotFile
}

// translate is query as this connection runs it (see [dialectConnector]).
func (c *dialectConn) translate(query string) translation {
	if c.file != nil && c.file.statement(query) >= 0 {
		return translateVerbatim(query)
	}
	return translate(query)
}

func (c *dialectConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *dialectConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	t := c.translate(query)
	s, err := c.base.(driver.ConnPrepareContext).PrepareContext(ctx, t.text)
	if err != nil {
		return nil, err
	}
	return &dialectStmt{base: s, t: t}, nil
}

func (c *dialectConn) Close() error { return c.base.Close() }

func (c *dialectConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *dialectConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.base.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *dialectConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	t := c.translate(query)
	bound, err := bindArgs(t.params, args)
	if err != nil {
		return nil, err
	}
	return c.base.(driver.ExecerContext).ExecContext(ctx, t.text, bound)
}

func (c *dialectConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	t := c.translate(query)
	bound, err := bindArgs(t.params, args)
	if err != nil {
		return nil, err
	}
	return c.base.(driver.QueryerContext).QueryContext(ctx, t.text, bound)
}

// CheckNamedValue accepts every argument as it is; binding is by position
// after [bindArgs], so named arguments are allowed.
func (c *dialectConn) CheckNamedValue(*driver.NamedValue) error { return nil }

type dialectStmt struct {
	base driver.Stmt
	t    translation
}

func (s *dialectStmt) Close() error  { return s.base.Close() }
func (s *dialectStmt) NumInput() int { return -1 }

func (s *dialectStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), ordinalArgs(args))
}

func (s *dialectStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), ordinalArgs(args))
}

func (s *dialectStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	bound, err := bindArgs(s.t.params, args)
	if err != nil {
		return nil, err
	}
	return s.base.(driver.StmtExecContext).ExecContext(ctx, bound)
}

func (s *dialectStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	bound, err := bindArgs(s.t.params, args)
	if err != nil {
		return nil, err
	}
	return s.base.(driver.StmtQueryContext).QueryContext(ctx, bound)
}
