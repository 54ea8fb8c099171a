package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/outboxlab/outboxlab/clock"
)

// This file is session 21's claim path at scale: a [Claimer] runs one claim
// design ([ScaleSQL], in scale_sql.go) with its statements prepared, in
// batches, with a retry that never gives up; and the lab's tools around it:
// streamed seeding, query plans, page reads and the bench's ceiling.

// Retry is how a claimer waits for the write lock. SQLite's own busy
// handler sleeps 1, 2, 5, 10 … 100 ms between tries, so under contention a
// waiter can sleep through every moment the lock is free while a busy
// worker takes it again at once, and starve past its timeout. A Retry turns
// that handler down and tries again after a short jittered pause that never
// grows; once a transaction has waited eight pauses it tries sixteen times
// as often, so the longest waiter is the likeliest to get the lock next.
// It never gives up before ctx ends: a claim is delayed, never failed.
type Retry struct {
	// BusyHandler sets SQLite's busy handler on the claimer's connection:
	// [BusyHandlerOff] (also the zero value's choice), so SQLITE_BUSY comes
	// back at once, or [BusyHandlerOneSecond].
	BusyHandler Stmt
	// Pause is the longest jittered sleep between two tries; 0 only yields.
	Pause time.Duration

	onBusy func() // a test's handshake: called after each SQLITE_BUSY, before the pause
}

// DefaultRetry is what the bench and session 21 use.
var DefaultRetry = Retry{BusyHandler: BusyHandlerOff, Pause: time.Millisecond}

// setBusyHandler runs r's busy-handler statement on db's connection. On
// PostgreSQL there is none to set: a claim waits for no lock (its select
// skips locked rows), and a transaction that meets a serialization failure,
// a deadlock or an unavailable lock comes back at once and is retried.
func setBusyHandler(ctx context.Context, db *DB, r Retry) error {
	if db.Engine() == Postgres {
		return nil
	}
	s := r.BusyHandler
	if s.SQL == "" {
		s = BusyHandlerOff
	}
	if _, err := db.sql.ExecContext(ctx, s.SQL); err != nil {
		return fmt.Errorf("store: set busy handler: %w", err)
	}
	return nil
}

// inTxRetry is [DB.InTx] with r's pauses: one BEGIN IMMEDIATE transaction,
// retried after SQLITE_BUSY until it commits or ctx ends. held is how long
// the last attempt took, BEGIN to COMMIT: the transaction's own cost,
// without the waiting.
func (db *DB) inTxRetry(ctx context.Context, r Retry, fn func(tx *sql.Tx) error) (stats TxStats, held time.Duration, err error) {
	return retryBusy(ctx, r.pause, r.onBusy, func() (bool, error) { return true, db.tryTx(ctx, fn) })
}

// pause is how long to sleep before the next try, once a transaction has
// waited waited: a jittered pause up to r.Pause, sixteen times shorter once
// it has waited eight pauses; 0 (only yield) when r.Pause is 0.
func (r Retry) pause(_ int, waited time.Duration) time.Duration {
	if r.Pause <= 0 {
		return 0
	}
	ceiling := r.Pause
	if waited > 8*r.Pause {
		ceiling = max(r.Pause/16, time.Microsecond)
	}
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Microsecond
}

// pauseFor sleeps d, or only yields the processor when d is 0.
func pauseFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		runtime.Gosched()
		return ctx.Err()
	}
	return sleep(ctx, d)
}

// ClaimedMessage is one message a claim took, with its fencing token.
type ClaimedMessage struct {
	ID           int64
	AggregateKey string
	Payload      string
	CreatedAt    string
	LockedUntil  string
	Token        int64 // ClaimToken after this claim; finalize must present it
}

// ClaimedBatch is the result of [Claimer.Claim]. No messages means nothing
// was claimable: an expected value, not an error.
type ClaimedBatch struct {
	Messages []ClaimedMessage // oldest first
	Stats    TxStats
	Held     time.Duration // the committed attempt alone, BEGIN to COMMIT
}

// FinalizedBatch is the result of [Claimer.Finalize].
type FinalizedBatch struct {
	Finalized []int64 // the guarded update changed this message's row
	Rejected  []int64 // 0 rows: the claimer no longer owns it under its token
	Stats     TxStats
	Held      time.Duration // the committed attempt alone, BEGIN to COMMIT
}

// MessageState is one message's row as [DB.MessageState] reads it back.
type MessageState struct {
	ID          int64
	Found       bool // false: no such row
	Status      string
	LockedBy    string
	Token       int64  // ClaimToken
	ProcessedAt string // ProcessedAtUtc, empty while NULL
}

// ClaimerConfig chooses a claimer's statements and retry.
type ClaimerConfig struct {
	SQL   ScaleSQL // [IndexedScale], [LessonScale], or a mistake design
	Retry Retry
}

// Claimer is one worker's claim path at scale, the service of
// OutboxMessages at scale: its connection, its design's claim and finalize
// statements prepared once, and its retry.
type Claimer struct {
	db     *DB
	worker string
	cfg    ClaimerConfig
	sel    *sql.Stmt
	one    *sql.Stmt
	batch  *sql.Stmt
	final  *sql.Stmt
	finals *sql.Stmt
}

// NewClaimer prepares worker's statements on db and sets cfg.Retry's busy
// handler on db's connection.
func NewClaimer(ctx context.Context, db *DB, worker string, cfg ClaimerConfig) (*Claimer, error) {
	if err := setBusyHandler(ctx, db, cfg.Retry); err != nil {
		return nil, err
	}
	c := &Claimer{db: db, worker: worker, cfg: cfg}
	s := cfg.SQL
	if s.PostgresOnly && db.Engine() != Postgres {
		return nil, fmt.Errorf("store: the %s claim runs on PostgreSQL only", s.Name)
	}
	for _, p := range []struct {
		dst  **sql.Stmt
		stmt Stmt
	}{{&c.sel, s.SelectNext}, {&c.one, s.ClaimOne}, {&c.batch, s.ClaimBatch},
		{&c.final, s.Finalize}, {&c.finals, s.FinalizeBatch}} {
		if s.OneStatement && (p.dst == &c.sel || p.dst == &c.one) {
			continue // never run: one message is a batch of one
		}
		if p.stmt.SQL == "" {
			c.Close()
			return nil, fmt.Errorf("store: %s claimer for %s: a statement of the design is missing", s.Name, worker)
		}
		ps, err := db.sql.PrepareContext(ctx, p.stmt.SQL)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("store: prepare %q for %s: %w", p.stmt.Name, worker, err)
		}
		*p.dst = ps
	}
	return c, nil
}

// Close releases the prepared statements; the connection stays open.
func (c *Claimer) Close() error {
	var errs []error
	for _, s := range []*sql.Stmt{c.sel, c.one, c.batch, c.final, c.finals} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// Claim takes up to limit of the oldest claimable messages in one
// transaction with a lease until now+lease, each with a new fencing token.
// With limit 1 it runs the design's SelectNext and ClaimOne (unless the
// design claims in [ScaleSQL.OneStatement]), otherwise its ClaimBatch.
// With an error the batch holds no messages: the transaction rolled back.
func (c *Claimer) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (ClaimedBatch, error) {
	if limit < 1 {
		return ClaimedBatch{}, fmt.Errorf("store: claim for %s: limit %d, want at least 1", c.worker, limit)
	}
	l := OutboxLeaseFor(c.worker, now, lease)
	args := append([]any{sql.Named("now", clock.Format(now)), sql.Named("limit", limit)}, l.claimArgs("worker")...)
	fn := c.claimBatch
	if limit == 1 && !c.cfg.SQL.OneStatement {
		fn = c.claimOne
	}
	var b ClaimedBatch
	stats, held, err := c.db.inTxRetry(ctx, c.cfg.Retry, func(tx *sql.Tx) error {
		b.Messages = b.Messages[:0]
		return fn(ctx, tx, args, &b)
	})
	b.Stats, b.Held = stats, held
	if err != nil {
		// The transaction rolled back, perhaps after its rows were read (a
		// COMMIT that failed): none of them is claimed.
		b.Messages = nil
		return b, fmt.Errorf("store: %s claim of %d for %s: %w", c.cfg.SQL.Name, limit, c.worker, err)
	}
	for i := range b.Messages {
		b.Messages[i].LockedUntil = clock.Format(l.Until)
	}
	return b, nil
}

// claimOne selects the oldest claimable message and takes it by Id.
func (c *Claimer) claimOne(ctx context.Context, tx *sql.Tx, args []any, b *ClaimedBatch) error {
	var m ClaimedMessage
	err := tx.StmtContext(ctx, c.sel).QueryRowContext(ctx, args...).Scan(&m.ID, &m.AggregateKey, &m.Payload, &m.CreatedAt, &m.Token)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	res, err := tx.StmtContext(ctx, c.one).ExecContext(ctx, append(args, sql.Named("id", m.ID))...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		// Impossible under BEGIN IMMEDIATE, or under the row lock the
		// select took on PostgreSQL: nobody wrote the row since the select.
		return fmt.Errorf("message %d: take changed %d rows after select", m.ID, n)
	}
	// The write lock (the row lock) is held since the select, so the token
	// is the one we read + 1.
	m.Token++
	b.Messages = append(b.Messages, m)
	return nil
}

// claimBatch takes up to :limit messages in one UPDATE … RETURNING.
func (c *Claimer) claimBatch(ctx context.Context, tx *sql.Tx, args []any, b *ClaimedBatch) error {
	msgs, err := scanClaimed(tx.StmtContext(ctx, c.batch).QueryContext(ctx, args...))
	b.Messages = append(b.Messages, msgs...)
	return err
}

// scanClaimed reads the messages a claim's UPDATE … RETURNING took (Id,
// AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken), oldest
// first: RETURNING promises no order, and a worker processes oldest first.
func scanClaimed(rows *sql.Rows, err error) ([]ClaimedMessage, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var msgs []ClaimedMessage
	for rows.Next() {
		var m ClaimedMessage
		if err := rows.Scan(&m.ID, &m.AggregateKey, &m.Payload, &m.CreatedAt, &m.LockedUntil, &m.Token); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(msgs, func(a, b ClaimedMessage) int {
		return cmp.Or(strings.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return msgs, rows.Close()
}

// scanIDs reads the one integer column of each row a query returned: the
// Ids a batch finalization's or a one-statement claim's RETURNING gave,
// or the Ids a bench reads back.
func scanIDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ids, rows.Close()
}

// claimsJSON is msgs as the JSON array of [id, token] pairs a batch
// finalization reads from :claims.
func claimsJSON(msgs []ClaimedMessage) string {
	pairs := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			pairs = append(pairs, ',')
		}
		pairs = fmt.Appendf(pairs, "[%d,%d]", m.ID, m.Token)
	}
	return string(append(pairs, ']'))
}

// sortOut puts each of msgs in f.Finalized when done names it, else in
// f.Rejected (its guard refused it).
func (f *FinalizedBatch) sortOut(msgs []ClaimedMessage, done []int64) {
	for _, m := range msgs {
		if slices.Contains(done, m.ID) {
			f.Finalized = append(f.Finalized, m.ID)
		} else {
			f.Rejected = append(f.Rejected, m.ID)
		}
	}
}

// Finalize marks msgs Processed in one transaction, each row under its own
// guard (the lesson's: owner and token). One message runs the design's
// Finalize; more run its FinalizeBatch once. A row the guard refuses is
// reported in Rejected, an expected outcome; the others commit.
func (c *Claimer) Finalize(ctx context.Context, msgs []ClaimedMessage, now time.Time) (FinalizedBatch, error) {
	if len(msgs) == 0 {
		return FinalizedBatch{}, nil
	}
	args := []any{sql.Named("now", clock.Format(now)), sql.Named("worker", c.worker)}
	fn := c.finalizeBatch
	if len(msgs) == 1 {
		fn = c.finalizeOne
	}
	var done []int64
	stats, held, err := c.db.inTxRetry(ctx, c.cfg.Retry, func(tx *sql.Tx) error {
		var err error
		done, err = fn(ctx, tx, args, msgs)
		return err
	})
	f := FinalizedBatch{Stats: stats, Held: held}
	if err != nil {
		return f, fmt.Errorf("store: finalize %d messages for %s: %w", len(msgs), c.worker, err)
	}
	f.sortOut(msgs, done)
	return f, nil
}

// finalizeOne runs the design's Finalize for one message.
func (c *Claimer) finalizeOne(ctx context.Context, tx *sql.Tx, args []any, msgs []ClaimedMessage) ([]int64, error) {
	m := msgs[0]
	res, err := tx.StmtContext(ctx, c.final).ExecContext(ctx, append(args, sql.Named("id", m.ID), sql.Named("token", m.Token))...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil || n != 1 {
		return nil, err
	}
	return []int64{m.ID}, nil
}

// finalizeBatch runs the design's FinalizeBatch once for msgs, passed as a
// JSON array of [id, token] pairs.
func (c *Claimer) finalizeBatch(ctx context.Context, tx *sql.Tx, args []any, msgs []ClaimedMessage) ([]int64, error) {
	return scanIDs(tx.StmtContext(ctx, c.finals).QueryContext(ctx, append(args, sql.Named("claims", claimsJSON(msgs)))...))
}

// Backlog describes the messages [SeedBacklog] writes.
type Backlog struct {
	Messages int           // how many
	After    int           // messages seeded before: the keys go on from MSG-<After+1>
	First    time.Time     // CreatedAtUtc of the first; Ids follow creation order
	Spacing  time.Duration // between two messages' CreatedAtUtc
	Chunk    int           // rows per transaction (default 50,000)
	// PayloadBytes pads each message's JSON payload to about this size, as
	// a real event carries; 0 keeps it minimal.
	PayloadBytes int
	// RoomForVersions, on PostgreSQL, seeds the table with room in every
	// page for the versions a drain writes ([RoomForVersions]), so the
	// drain's plans stay the ones it started with; the bench, which
	// measures the table as deployed, leaves it off.
	RoomForVersions bool
	// Progress, if set, is told how many rows have committed after each chunk.
	Progress func(done int)
}

// SeedBacklog inserts b.Messages Pending messages into db, streamed: one
// prepared [SeedBacklogMessage] in transactions of b.Chunk rows, so memory
// stays flat however long the backlog. On PostgreSQL it first runs
// [RoomForVersions] if asked, and then [QuietBacklog] and [AnalyzeBacklog].
func SeedBacklog(ctx context.Context, db *DB, b Backlog) error {
	if b.Chunk <= 0 {
		b.Chunk = 50_000
	}
	if b.RoomForVersions && db.Engine() == Postgres {
		if _, err := db.sql.ExecContext(ctx, RoomForVersions.SQL); err != nil {
			return fmt.Errorf("store: seed backlog: %w", err)
		}
	}
	stmt, err := db.sql.PrepareContext(ctx, SeedBacklogMessage.SQL)
	if err != nil {
		return fmt.Errorf("store: seed backlog: %w", err)
	}
	defer stmt.Close()
	for done := 0; done < b.Messages; {
		end := min(done+b.Chunk, b.Messages)
		_, err := db.InTx(ctx, func(tx *sql.Tx) error {
			s := tx.StmtContext(ctx, stmt)
			for i := done; i < end; i++ {
				_, err := s.ExecContext(ctx,
					sql.Named("key", fmt.Sprintf("MSG-%07d", b.After+i+1)),
					sql.Named("payload", backlogPayload(b.After+i+1, b.PayloadBytes)),
					sql.Named("created", clock.Format(b.First.Add(time.Duration(i)*b.Spacing))))
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: seed backlog rows %d-%d: %w", done+1, end, err)
		}
		done = end
		if b.Progress != nil {
			b.Progress(done)
		}
	}
	if db.Engine() == Postgres {
		for _, s := range []Stmt{QuietBacklog, AnalyzeBacklog} {
			if _, err := db.sql.ExecContext(ctx, s.SQL); err != nil {
				return fmt.Errorf("store: seed backlog: %w", err)
			}
		}
	}
	return nil
}

// backlogPayload is message seq's JSON payload, padded to about size bytes.
func backlogPayload(seq, size int) string {
	p := fmt.Sprintf(`{"seq":%d}`, seq)
	if pad := size - len(p) - len(`,"data":""`); pad > 0 {
		p = fmt.Sprintf(`{"seq":%d,"data":"%s"}`, seq, strings.Repeat("x", pad))
	}
	return p
}

// CeilingProbe runs [CeilingUpdate], prepared, one BEGIN IMMEDIATE
// transaction per call, through the same retry as a [Claimer].
type CeilingProbe struct {
	db    *DB
	retry Retry
	stmt  *sql.Stmt
}

// NewCeilingProbe creates the ceiling table in db's file and prepares the update.
func NewCeilingProbe(ctx context.Context, db *DB, r Retry) (*CeilingProbe, error) {
	if err := setBusyHandler(ctx, db, r); err != nil {
		return nil, err
	}
	if _, err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, CeilingTable.SQL)
		return err
	}); err != nil {
		return nil, fmt.Errorf("store: create ceiling table: %w", err)
	}
	s, err := db.sql.PrepareContext(ctx, CeilingUpdate.SQL)
	if err != nil {
		return nil, fmt.Errorf("store: prepare ceiling update: %w", err)
	}
	return &CeilingProbe{db: db, retry: r, stmt: s}, nil
}

// Update runs one ceiling transaction.
func (p *CeilingProbe) Update(ctx context.Context) (TxStats, error) {
	stats, _, err := p.db.inTxRetry(ctx, p.retry, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, p.stmt).ExecContext(ctx)
		return err
	})
	if err != nil {
		return stats, fmt.Errorf("store: ceiling update: %w", err)
	}
	return stats, nil
}

// Close releases the prepared statement.
func (p *CeilingProbe) Close() error { return p.stmt.Close() }

// PageReads is how many pages this connection has fetched through its page
// cache since it opened (hits plus misses): a deterministic measure of how
// much of the database its statements read. SQLite only: on PostgreSQL,
// whose statistics count per table, not per connection, see
// [DB.SchemaRowReads].
func (db *DB) PageReads(ctx context.Context) (int64, error) {
	if db.Engine() == Postgres {
		return 0, errors.New("store: page reads: a PostgreSQL connection does not count its own; read the schema's rows (SchemaRowReads)")
	}
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: page reads: %w", err)
	}
	defer conn.Close()
	var total int64
	err = conn.Raw(func(dc any) error {
		// Under the statement ledger's recording connection (or another
		// wrapper) is the driver's own.
		for {
			w, ok := dc.(interface{ Unwrap() driver.Conn })
			if !ok {
				break
			}
			dc = w.Unwrap()
		}
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return errors.New("driver has no connection status")
		}
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			cur, _, err := st.Status(op, false)
			if err != nil {
				return err
			}
			total += int64(cur)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: page reads: %w", err)
	}
	return total, nil
}

// ClaimPlan returns the query plan of s's SelectNext at now (its
// PlanNext), one line a step, indented by depth, so a report can show
// whether the claim scans the table or walks an index: SQLite's EXPLAIN
// QUERY PLAN, or PostgreSQL's EXPLAIN (COSTS OFF) with the parameters
// bound.
func ClaimPlan(ctx context.Context, db *DB, s ScaleSQL, now time.Time) ([]string, error) {
	rows, err := db.sql.QueryContext(ctx, s.PlanNext.SQL, sql.Named("now", clock.Format(now)), sql.Named("limit", 1))
	if err != nil {
		return nil, fmt.Errorf("store: query plan of the %s claim: %w", s.Name, err)
	}
	defer rows.Close()
	if db.Engine() == Postgres {
		return postgresPlan(rows, s)
	}
	depth := map[int]int{}
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, fmt.Errorf("store: query plan of the %s claim: %w", s.Name, err)
		}
		depth[id] = depth[parent] + 1
		out = append(out, strings.Repeat("  ", depth[id]-1)+detail)
	}
	return out, rows.Err()
}

// postgresPlan reads EXPLAIN's lines: each plan node ("->  Limit") and
// each of its details ("Filter: ..."), re-indented two spaces a level as
// SQLite's plan is.
func postgresPlan(rows *sql.Rows, s ScaleSQL) ([]string, error) {
	var out []string
	var indents []int // the text column of each open node level
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return nil, fmt.Errorf("store: query plan of the %s claim: %w", s.Name, err)
		}
		text := strings.TrimLeft(line, " ")
		col := len(line) - len(text)
		node := strings.HasPrefix(text, "->  ")
		if node {
			text = strings.TrimPrefix(text, "->  ")
			col += len("->  ")
		}
		for len(indents) > 0 && indents[len(indents)-1] >= col {
			indents = indents[:len(indents)-1]
		}
		depth := len(indents)
		if node || len(out) == 0 {
			indents = append(indents, col)
		}
		out = append(out, strings.Repeat("  ", depth)+strings.TrimRight(text, " "))
	}
	return out, rows.Err()
}

// MessageState reads message id back ([ReadMessageState]); Found is false
// when there is no such row.
func (db *DB) MessageState(ctx context.Context, id int64) (MessageState, error) {
	m := MessageState{ID: id}
	var lockedBy, processed sql.NullString
	err := db.sql.QueryRowContext(ctx, ReadMessageState.SQL, sql.Named("id", id)).Scan(&m.Status, &lockedBy, &m.Token, &processed)
	if errors.Is(err, sql.ErrNoRows) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("store: read back message %d: %w", id, err)
	}
	m.Found, m.LockedBy, m.ProcessedAt = true, lockedBy.String, processed.String
	return m, nil
}

// FlushStats makes a PostgreSQL connection hand the statistics it has
// gathered to the server's counters now ([FlushStatistics]), so that
// [DB.SchemaRowReads] counts its work so far. On SQLite it does nothing.
func (db *DB) FlushStats(ctx context.Context) error {
	if db.Engine() != Postgres {
		return nil
	}
	if _, err := db.sql.ExecContext(ctx, FlushStatistics.SQL); err != nil {
		return fmt.Errorf("store: flush statistics: %w", err)
	}
	return nil
}

// SchemaRowReads is how many live rows the server's scans have read from
// the tables of db's schema ([SchemaRowReads]: rows sequential scans
// returned plus rows index scans fetched, from pg_stat_user_tables): the
// PostgreSQL measure of a drain's cost, read before and after it. Every
// connection whose work counts must call [DB.FlushStats] first.
// PostgreSQL only.
func (db *DB) SchemaRowReads(ctx context.Context) (int64, error) {
	if db.Engine() != Postgres {
		return 0, errors.New("store: schema row reads: PostgreSQL only; SQLite counts pages per connection (PageReads)")
	}
	var n int64
	if err := db.sql.QueryRowContext(ctx, SchemaRowReads.SQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: schema row reads: %w", err)
	}
	return n, nil
}

// TablePages is how many pages OutboxMessages fills in db's schema
// ([DrainedTablePages]). PostgreSQL only.
func (db *DB) TablePages(ctx context.Context) (int64, error) {
	if db.Engine() != Postgres {
		return 0, errors.New("store: table pages: PostgreSQL only")
	}
	var n int64
	if err := db.sql.QueryRowContext(ctx, DrainedTablePages.SQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: table pages: %w", err)
	}
	return n, nil
}

// ServerVersion is the version of the PostgreSQL server behind db.
func (db *DB) ServerVersion(ctx context.Context) (string, error) {
	var v string
	if err := db.sql.QueryRowContext(ctx, ReadServerVersion.SQL).Scan(&v); err != nil {
		return "", fmt.Errorf("store: server version: %w", err)
	}
	return v, nil
}

// SQLiteVersion is the version of the SQLite library behind db.
func (db *DB) SQLiteVersion(ctx context.Context) (string, error) {
	var v string
	if err := db.sql.QueryRowContext(ctx, ReadSQLiteVersion.SQL).Scan(&v); err != nil {
		return "", fmt.Errorf("store: sqlite version: %w", err)
	}
	return v, nil
}
