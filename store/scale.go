package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"

	"github.com/outboxlab/outboxlab/clock"
)

// This file is session 21's claim path at scale: the lesson's claim and an
// indexed claim of the same semantics, both fenced with ClaimToken; token-
// and owner-guarded finalize; batches; prepared statements; streamed seeding.

// The claimable predicates session 21 compares. Each selects the same
// messages as [Claimable] (the lesson's), except the mistake.
const (
	// LessonWhere is the lesson's predicate as it stands. The OR of two
	// statuses matches no index: SQLite reads the whole table, Processed
	// rows included, and sorts what matches, on every claim.
	LessonWhere = Claimable

	// IndexedWhere is the lesson's predicate plus a term that is always true
	// of an unfinished message (finalize sets ProcessedAtUtc with Status
	// 'Processed') and that names the WHERE clause of [ClaimsAtScale]'s
	// partial index. SQLite then walks that index oldest first and stops at
	// the first claimable message: it skips only messages under a live lease
	// (at most workers × batch of them), never the processed history.
	IndexedWhere = `ProcessedAtUtc IS NULL
  AND ` + Claimable

	// PendingOnlyWhere is a tempting mistake: keep only the Pending half of
	// the OR. It walks the same index and is as fast, and a message whose
	// owner died while it was Processing is never claimed again.
	PendingOnlyWhere = `ProcessedAtUtc IS NULL
  AND Status = 'Pending'`
)

// ScaleClaim is a claim of session 21 in its two shapes. Claiming one
// message selects the oldest claimable one and takes it by Id with the
// predicate repeated (Day 15's shape), in one BEGIN IMMEDIATE transaction;
// claiming a batch takes up to :limit in one UPDATE whose subquery is the
// same question. Every message claimed gets a new fencing token
// (ClaimToken + 1). Parameters: :now, :worker, :until, :id, :limit.
type ScaleClaim struct {
	Name   string // lesson, indexed, or the mistake's name
	About  string // one line for reports
	Where  string // the claimable predicate
	Select string // the oldest claimable message, with what a worker needs
	Take   string // take message :id, only if still claimable
	Batch  string // take up to :limit of the oldest claimable messages
}

func newScaleClaim(name, about, where string) ScaleClaim {
	set := `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE `
	return ScaleClaim{
		Name:  name,
		About: about,
		Where: where,
		Select: `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ` + where + `
ORDER BY CreatedAtUtc, Id
LIMIT 1`,
		Take: set + `Id = :id
  AND ` + where,
		Batch: set + `Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ` + strings.ReplaceAll(where, "\n", "\n    ") + `
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`,
	}
}

// The claims session 21 compares, and the mistake it warns about.
var (
	// LessonScaleClaim is the lesson's claim statement, fenced.
	LessonScaleClaim = newScaleClaim("lesson", "the lesson's OR predicate: reads the whole table on every claim", LessonWhere)
	// IndexedScaleClaim has the lesson's semantics and walks a partial index.
	IndexedScaleClaim = newScaleClaim("indexed", "the same predicate on the unprocessed-messages index: flat cost", IndexedWhere)
	// PendingOnlyScaleClaim is the mistake of dropping the expired-lease half.
	PendingOnlyScaleClaim = newScaleClaim("pending-only", "MISTAKE: only the Pending half; expired leases are never reclaimed", PendingOnlyWhere)
)

// ScaleClaimNamed returns the claim the bench names on its command line:
// lesson or indexed.
func ScaleClaimNamed(name string) (ScaleClaim, bool) {
	for _, c := range []ScaleClaim{LessonScaleClaim, IndexedScaleClaim} {
		if c.Name == name {
			return c, true
		}
	}
	return ScaleClaim{}, false
}

// ScaleFinalize completes claimed messages: one per statement, or a whole
// batch in one statement that still checks each row's own token.
// Parameters: :now, :worker, and :id with :token, or :claims, a JSON array
// of [id, token] pairs.
type ScaleFinalize struct {
	Name  string
	One   string
	Batch string // RETURNING the Ids it completed
}

// The finalizations of session 21.
var (
	// FencedFinalize completes a message only while this worker owns it
	// under the token its claim returned. A stale owner changes 0 rows.
	FencedFinalize = ScaleFinalize{
		Name: "owner- and token-guarded",
		One: `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id
  AND Status = 'Processing'
  AND LockedBy = :worker
  AND ClaimToken = :token`,
		Batch: `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM (SELECT value ->> 0 AS Id, value ->> 1 AS Token FROM json_each(:claims)) AS Claimed
WHERE OutboxMessages.Id = Claimed.Id
  AND OutboxMessages.Status = 'Processing'
  AND OutboxMessages.LockedBy = :worker
  AND OutboxMessages.ClaimToken = Claimed.Token
RETURNING OutboxMessages.Id`,
	}

	// ByIDFinalize is the mistake: completion by Id alone. A worker whose
	// lease expired still completes, and so does the one who took over.
	ByIDFinalize = ScaleFinalize{
		Name: "by Id alone (MISTAKE)",
		One: `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id`,
		Batch: `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id IN (SELECT value ->> 0 FROM json_each(:claims))
RETURNING Id`,
	}
)

// Statements around the claim path: audit, ceiling, and a mistake.
const (
	// CountUnprocessedSQL counts messages a drain left behind.
	CountUnprocessedSQL = `SELECT count(*) FROM OutboxMessages WHERE Status <> 'Processed'`

	// CountReclaimsSQL counts claims beyond the first of each message, from
	// the fencing token every claim increments. Where no lease expires (a
	// bench cell), each of them is a duplicate.
	CountReclaimsSQL = `SELECT coalesce(sum(ClaimToken - 1), 0) FROM OutboxMessages WHERE ClaimToken > 1`

	// CeilingTableSQL is the bench's reference table. The bench keeps it in a
	// file of its own with the same settings as the drained backlogs.
	CeilingTableSQL = `CREATE TABLE IF NOT EXISTS BenchCeiling (Id INTEGER PRIMARY KEY, Hits INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO BenchCeiling (Id) VALUES (1)`

	// CeilingUpdateSQL is the cheapest useful write transaction: one row by
	// primary key, one unindexed column. Its rate is the ceiling of any
	// claim path with the same settings.
	CeilingUpdateSQL = `UPDATE BenchCeiling SET Hits = Hits + 1 WHERE Id = 1`

	// DropClaimIndexSQL removes the indexed claim's partial index.
	DropClaimIndexSQL = `DROP INDEX IF EXISTS IX_OutboxMessages_Unprocessed_CreatedAtUtc`
)

// WithoutClaimIndex is a mistake applied after [ClaimsAtScale]: the indexed
// claim shipped without the index it was written for.
var WithoutClaimIndex = Migration{Name: "021 without its index (MISTAKE)", SQL: DropClaimIndexSQL}

// Retry is how a claimer waits for the write lock. SQLite's own busy
// handler sleeps 1, 2, 5, 10 … 100 ms between tries, so under contention a
// waiter can sleep through every moment the lock is free while a busy
// worker takes it again at once, and starve past its timeout. A Retry turns
// that handler down and tries again after a short jittered pause that never
// grows; once a transaction has waited eight pauses it tries sixteen times
// as often, so the longest waiter is the likeliest to get the lock next.
// It never gives up before ctx ends: a claim is delayed, never failed.
type Retry struct {
	// BusyTimeout is SQLite's busy handler wait on this connection; 0 turns
	// the handler off, so SQLITE_BUSY comes back at once.
	BusyTimeout time.Duration
	// Pause is the longest jittered sleep between two tries; 0 only yields.
	Pause time.Duration
}

// DefaultRetry is what the bench and session 21 use.
var DefaultRetry = Retry{BusyTimeout: 0, Pause: time.Millisecond}

// SetBusyTimeout changes how long SQLite's busy handler waits on this
// connection before returning SQLITE_BUSY; 0 turns it off.
func (db *DB) SetBusyTimeout(ctx context.Context, d time.Duration) error {
	if _, err := db.sql.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", d.Milliseconds())); err != nil {
		return fmt.Errorf("store: set busy timeout: %w", err)
	}
	return nil
}

// inTxRetry is [DB.InTx] with r's pauses: one BEGIN IMMEDIATE transaction,
// retried after SQLITE_BUSY until it commits or ctx ends. held is how long
// the last attempt took, BEGIN to COMMIT: the transaction's own cost,
// without the waiting.
func (db *DB) inTxRetry(ctx context.Context, r Retry, fn func(tx *sql.Tx) error) (stats TxStats, held time.Duration, err error) {
	start := time.Now()
	for {
		attempt := time.Now()
		err := db.tryTx(ctx, fn)
		if err == nil || !IsBusy(err) {
			now := time.Now()
			return TxStats{BusyRetries: stats.BusyRetries, Waited: now.Sub(start)}, now.Sub(attempt), err
		}
		stats.BusyRetries++
		pause := time.Duration(0)
		if r.Pause > 0 {
			ceiling := r.Pause
			if time.Since(start) > 8*r.Pause {
				ceiling = max(r.Pause/16, time.Microsecond)
			}
			pause = time.Duration(rand.Int64N(int64(ceiling))) + time.Microsecond
		}
		if err := pauseFor(ctx, pause); err != nil {
			stats.Waited = time.Since(start)
			return stats, 0, fmt.Errorf("store: gave up after %d busy retries: %w", stats.BusyRetries, err)
		}
	}
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

// ClaimerConfig chooses a claimer's statements and retry.
type ClaimerConfig struct {
	Claim    ScaleClaim
	Finalize ScaleFinalize // FencedFinalize unless a lesson shows a mistake
	Retry    Retry
}

// Claimer is one worker's claim path at scale: its connection, its claim
// and finalize statements prepared once, and its retry.
type Claimer struct {
	db     *DB
	worker string
	cfg    ClaimerConfig
	sel    *sql.Stmt
	take   *sql.Stmt
	batch  *sql.Stmt
	final  *sql.Stmt
	finals *sql.Stmt
}

// NewClaimer prepares worker's statements on db and applies cfg.Retry's
// busy timeout to db's connection.
func (db *DB) NewClaimer(ctx context.Context, worker string, cfg ClaimerConfig) (*Claimer, error) {
	if cfg.Finalize.One == "" {
		cfg.Finalize = FencedFinalize
	}
	if err := db.SetBusyTimeout(ctx, cfg.Retry.BusyTimeout); err != nil {
		return nil, err
	}
	c := &Claimer{db: db, worker: worker, cfg: cfg}
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{{&c.sel, cfg.Claim.Select}, {&c.take, cfg.Claim.Take}, {&c.batch, cfg.Claim.Batch},
		{&c.final, cfg.Finalize.One}, {&c.finals, cfg.Finalize.Batch}} {
		s, err := db.sql.PrepareContext(ctx, p.query)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("store: prepare %s claimer for %s: %w", cfg.Claim.Name, worker, err)
		}
		*p.dst = s
	}
	return c, nil
}

// Close releases the prepared statements; the connection stays open.
func (c *Claimer) Close() error {
	var errs []error
	for _, s := range []*sql.Stmt{c.sel, c.take, c.batch, c.final, c.finals} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// Claim takes up to limit of the oldest claimable messages in one
// transaction with a lease until now+lease, each with a new fencing token.
// With limit 1 it runs the claim's Select and Take, otherwise its Batch.
func (c *Claimer) Claim(ctx context.Context, now time.Time, lease time.Duration, limit int) (ClaimedBatch, error) {
	if limit < 1 {
		return ClaimedBatch{}, fmt.Errorf("store: claim for %s: limit %d, want at least 1", c.worker, limit)
	}
	until := clock.Format(now.Add(lease))
	args := []any{
		sql.Named("now", clock.Format(now)),
		sql.Named("worker", c.worker),
		sql.Named("until", until),
		sql.Named("limit", limit),
	}
	fn := c.claimBatch
	if limit == 1 {
		fn = c.claimOne
	}
	var b ClaimedBatch
	stats, held, err := c.db.inTxRetry(ctx, c.cfg.Retry, func(tx *sql.Tx) error {
		b.Messages = b.Messages[:0]
		return fn(ctx, tx, args, &b)
	})
	b.Stats, b.Held = stats, held
	for i := range b.Messages {
		b.Messages[i].LockedUntil = until
	}
	if err != nil {
		return b, fmt.Errorf("store: %s claim of %d for %s: %w", c.cfg.Claim.Name, limit, c.worker, err)
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
	res, err := tx.StmtContext(ctx, c.take).ExecContext(ctx, append(args, sql.Named("id", m.ID))...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		// Impossible under BEGIN IMMEDIATE: nobody wrote since the select.
		return fmt.Errorf("message %d: take changed %d rows after select", m.ID, n)
	}
	// The write lock is held since BEGIN, so the token is the one we read + 1.
	m.Token++
	b.Messages = append(b.Messages, m)
	return nil
}

// claimBatch takes up to :limit messages in one UPDATE … RETURNING.
func (c *Claimer) claimBatch(ctx context.Context, tx *sql.Tx, args []any, b *ClaimedBatch) error {
	rows, err := tx.StmtContext(ctx, c.batch).QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var m ClaimedMessage
		if err := rows.Scan(&m.ID, &m.AggregateKey, &m.Payload, &m.CreatedAt, &m.LockedUntil, &m.Token); err != nil {
			return err
		}
		b.Messages = append(b.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// RETURNING promises no order; a worker processes oldest first.
	sort.Slice(b.Messages, func(i, j int) bool {
		if b.Messages[i].CreatedAt != b.Messages[j].CreatedAt {
			return b.Messages[i].CreatedAt < b.Messages[j].CreatedAt
		}
		return b.Messages[i].ID < b.Messages[j].ID
	})
	return rows.Close()
}

// Finalize marks msgs Processed in one transaction, each row under its own
// guard (with [FencedFinalize]: owner and token). One message runs the
// finalize's One statement; more run its Batch statement once. A row the
// guard refuses is reported in Rejected, an expected outcome; the others
// commit.
func (c *Claimer) Finalize(ctx context.Context, msgs []ClaimedMessage, now time.Time) (FinalizedBatch, error) {
	if len(msgs) == 0 {
		return FinalizedBatch{}, nil
	}
	at := sql.Named("now", clock.Format(now))
	worker := sql.Named("worker", c.worker)
	var pairs []byte
	if len(msgs) > 1 {
		pairs = append(pairs, '[')
		for i, m := range msgs {
			if i > 0 {
				pairs = append(pairs, ',')
			}
			pairs = fmt.Appendf(pairs, "[%d,%d]", m.ID, m.Token)
		}
		pairs = append(pairs, ']')
	}
	var done []int64
	stats, held, err := c.db.inTxRetry(ctx, c.cfg.Retry, func(tx *sql.Tx) error {
		done = done[:0]
		if len(msgs) == 1 {
			res, err := tx.StmtContext(ctx, c.final).ExecContext(ctx, at, worker, sql.Named("id", msgs[0].ID), sql.Named("token", msgs[0].Token))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				done = append(done, msgs[0].ID)
			}
			return nil
		}
		rows, err := tx.StmtContext(ctx, c.finals).QueryContext(ctx, at, worker, sql.Named("claims", string(pairs)))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			done = append(done, id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return rows.Close()
	})
	f := FinalizedBatch{Stats: stats, Held: held}
	if err != nil {
		return f, fmt.Errorf("store: finalize %d messages for %s: %w", len(msgs), c.worker, err)
	}
	finalized := make(map[int64]bool, len(done))
	for _, id := range done {
		finalized[id] = true
	}
	for _, m := range msgs {
		if finalized[m.ID] {
			f.Finalized = append(f.Finalized, m.ID)
		} else {
			f.Rejected = append(f.Rejected, m.ID)
		}
	}
	return f, nil
}

// Backlog describes the messages [DB.SeedBacklog] writes.
type Backlog struct {
	Messages int           // how many
	First    time.Time     // CreatedAtUtc of the first; Ids follow creation order
	Spacing  time.Duration // between two messages' CreatedAtUtc
	Chunk    int           // rows per transaction (default 50,000)
	// PayloadBytes pads each message's JSON payload to about this size, as
	// a real event carries; 0 keeps it minimal.
	PayloadBytes int
	// Progress, if set, is told how many rows have committed after each chunk.
	Progress func(done int)
}

// SeedBacklog inserts b.Messages Pending messages, streamed: one prepared
// INSERT ([InsertOutboxSQL]) in transactions of b.Chunk rows, so memory
// stays flat however long the backlog.
func (db *DB) SeedBacklog(ctx context.Context, b Backlog) error {
	if b.Chunk <= 0 {
		b.Chunk = 50_000
	}
	stmt, err := db.sql.PrepareContext(ctx, InsertOutboxSQL)
	if err != nil {
		return fmt.Errorf("store: seed backlog: %w", err)
	}
	defer stmt.Close()
	for done := 0; done < b.Messages; {
		end := min(done+b.Chunk, b.Messages)
		_, err := db.InTx(ctx, func(tx *sql.Tx) error {
			s := tx.StmtContext(ctx, stmt)
			for i := done; i < end; i++ {
				key := fmt.Sprintf("MSG-%07d", i+1)
				at := clock.Format(b.First.Add(time.Duration(i) * b.Spacing))
				if _, err := s.ExecContext(ctx, "BacklogMessage", key, backlogPayload(i+1, b.PayloadBytes), at); err != nil {
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

// CeilingProbe runs [CeilingUpdateSQL], prepared, one BEGIN IMMEDIATE
// transaction per call, through the same retry as a [Claimer].
type CeilingProbe struct {
	db    *DB
	retry Retry
	stmt  *sql.Stmt
}

// NewCeilingProbe creates the ceiling table in db's file and prepares the update.
func (db *DB) NewCeilingProbe(ctx context.Context, r Retry) (*CeilingProbe, error) {
	if err := db.SetBusyTimeout(ctx, r.BusyTimeout); err != nil {
		return nil, err
	}
	if _, err := db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, CeilingTableSQL)
		return err
	}); err != nil {
		return nil, fmt.Errorf("store: create ceiling table: %w", err)
	}
	s, err := db.sql.PrepareContext(ctx, CeilingUpdateSQL)
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
// much of the database its statements read.
func (db *DB) PageReads(ctx context.Context) (int64, error) {
	conn, err := db.sql.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: page reads: %w", err)
	}
	defer conn.Close()
	var total int64
	err = conn.Raw(func(dc any) error {
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

// QueryPlan returns SQLite's EXPLAIN QUERY PLAN lines for query, indented
// by depth, so a report can show whether a claim scans or probes an index.
func (db *DB) QueryPlan(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.sql.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: query plan: %w", err)
	}
	defer rows.Close()
	depth := map[int]int{}
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, fmt.Errorf("store: query plan: %w", err)
		}
		depth[id] = depth[parent] + 1
		out = append(out, strings.Repeat("  ", depth[id]-1)+detail)
	}
	return out, rows.Err()
}

// SQLiteVersion is the version of the SQLite library behind db.
func (db *DB) SQLiteVersion(ctx context.Context) (string, error) {
	var v string
	if err := db.sql.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&v); err != nil {
		return "", fmt.Errorf("store: sqlite version: %w", err)
	}
	return v, nil
}

// ClaimPlan is [DB.QueryPlan] of c's Select at now: whether the claim
// scans the table or walks an index.
func (db *DB) ClaimPlan(ctx context.Context, c ScaleClaim, now time.Time) ([]string, error) {
	return db.QueryPlan(ctx, c.Select, sql.Named("now", clock.Format(now)), sql.Named("limit", 1))
}
