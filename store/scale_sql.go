package store

import "fmt"

// ScaleSQL is one claim design of session 21 on OutboxMessages, kept
// together as one value: the lesson's claim ([LessonScale]), the indexed
// claim of the same semantics ([IndexedScale]), and the mistake designs,
// which are the same value with statements replaced by mistakes declared
// below. Every claim gives each message it takes a new fencing token
// (ClaimToken + 1); finalize presents it.
//
// Parameters are named, and every statement of a field is called with the
// same arguments, so a mistake that drops a guard still runs with them:
//   - SelectNext, PlanNext: :now (and :limit, unused)
//   - ClaimOne: :now, :worker, :until, :id
//   - ClaimBatch: :now, :worker, :until, :limit
//   - Finalize: :now, :worker, :id, :token
//   - FinalizeBatch: :now, :worker, :claims (a JSON array of [id, token] pairs)
//
// On PostgreSQL every claim's select takes the row lock it claims, FOR
// UPDATE SKIP LOCKED, so two workers inside their transactions never pick
// the same message (SQLite's BEGIN IMMEDIATE serializes them instead); the
// batch finalize reads :claims with jsonb_array_elements, and the plan is
// PostgreSQL's EXPLAIN.
type ScaleSQL struct {
	// Name is "lesson", "indexed" or the mistake's name: what the bench's
	// --claim flag and a report's rows call the design.
	Name string
	// SelectNext is the oldest claimable message, with what a worker needs.
	SelectNext Stmt
	// ClaimOne takes message :id, only if it is still claimable (Day 15's
	// shape: SelectNext then ClaimOne in one BEGIN IMMEDIATE transaction).
	ClaimOne Stmt
	// ClaimBatch takes up to :limit of the oldest claimable messages in one
	// UPDATE whose subquery asks SelectNext's question.
	ClaimBatch Stmt
	// PlanNext is EXPLAIN QUERY PLAN of SelectNext: whether the claim scans
	// the table or walks an index.
	PlanNext Stmt
	// Finalize completes message :id; the lesson's version only while this
	// worker owns it under the token its claim returned.
	Finalize Stmt
	// FinalizeBatch completes a batch in one statement, each row under its
	// own guard, RETURNING the Ids it completed.
	FinalizeBatch Stmt
	// OneStatement claims even a single message with ClaimBatch (limit 1),
	// never with SelectNext then ClaimOne, which it may leave empty.
	OneStatement bool
	// PostgresOnly says the design's statements are written for
	// PostgreSQL alone (a row lock SQLite has no syntax for).
	PostgresOnly bool
}

// The claim designs session 21 compares, and the mistake it warns about.
var (
	// LessonScale is the lesson's claim, fenced. The OR of two statuses
	// matches no index: SQLite reads the whole table, Processed rows
	// included, and sorts what matches, on every claim.
	LessonScale = ScaleSQL{
		Name:          "lesson",
		SelectNext:    LessonSelectNext,
		ClaimOne:      LessonClaimOne,
		ClaimBatch:    LessonClaimBatch,
		PlanNext:      LessonPlanNext,
		Finalize:      ScaleFinalize,
		FinalizeBatch: ScaleFinalizeBatch,
	}

	// IndexedScale has the lesson's semantics and walks a partial index: its
	// predicate adds a term that is always true of an unfinished message
	// (finalize sets ProcessedAtUtc with Status 'Processed') and that names
	// the WHERE clause of [ClaimsAtScale]'s index. SQLite then walks that
	// index oldest first and stops at the first claimable message: it skips
	// only messages under a live lease (at most workers × batch of them),
	// never the processed history.
	IndexedScale = ScaleSQL{
		Name:          "indexed",
		SelectNext:    IndexedSelectNext,
		ClaimOne:      IndexedClaimOne,
		ClaimBatch:    IndexedClaimBatch,
		PlanNext:      IndexedPlanNext,
		Finalize:      ScaleFinalize,
		FinalizeBatch: ScaleFinalizeBatch,
	}

	// PendingOnlyScale is the indexed claim "optimized" to its Pending half:
	// it walks the same index and is as fast, and a message whose owner died
	// while it was Processing is never claimed again.
	PendingOnlyScale = ScaleSQL{
		Name:          "pending-only",
		SelectNext:    PendingOnlySelectNext,
		ClaimOne:      PendingOnlyClaimOne,
		ClaimBatch:    PendingOnlyClaimBatch,
		PlanNext:      PendingOnlyPlanNext,
		Finalize:      ScaleFinalize,
		FinalizeBatch: ScaleFinalizeBatch,
	}

	// SkipLockedScale is the production claim of PostgreSQL, the shape
	// River and MassTransit use: one UPDATE whose subquery picks and locks
	// the oldest claimable messages, skipping rows another worker has
	// locked, with the indexed claim's predicate and fencing token, and the
	// same owner- and token-guarded finalize. It claims one message with
	// the same statement (limit 1): one round trip, where the indexed
	// claim's select-then-take makes two. PostgreSQL only.
	SkipLockedScale = ScaleSQL{
		Name:          "skip-locked",
		ClaimBatch:    SkipLockedClaimBatch,
		PlanNext:      SkipLockedPlanNext,
		Finalize:      ScaleFinalize,
		FinalizeBatch: ScaleFinalizeBatch,
		OneStatement:  true,
		PostgresOnly:  true,
	}
)

// ScaleClaimNamed returns the claim design the bench names on its command
// line: lesson, indexed or skip-locked (PostgreSQL only: see
// [ScaleSQL.PostgresOnly]). Mistakes are not selectable.
func ScaleClaimNamed(name string) (ScaleSQL, bool) {
	for _, s := range []ScaleSQL{LessonScale, IndexedScale, SkipLockedScale} {
		if s.Name == name {
			return s, true
		}
	}
	return ScaleSQL{}, false
}

// The lesson claim's statements: Pending, or Processing with an expired lease.
var (
	// LessonSelectNext reads the whole table on every claim.
	// On PostgreSQL it locks the row it selects, skipping rows another
	// worker has locked.
	LessonSelectNext = namedOn("lesson claim: select the oldest claimable (reads the whole table)", `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)

	// LessonClaimOne takes the selected message with the predicate repeated.
	LessonClaimOne = named("lesson claim: take it only if still claimable, with a new fencing token", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id = :id
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))`)

	// LessonClaimBatch takes up to :limit messages in one statement. On
	// PostgreSQL its subquery locks the rows it picks, skipping locked
	// ones, and the take repeats the predicate, as ClaimOne does.
	LessonClaimBatch = namedOn("lesson claim: take up to :limit of the oldest claimable, each with a new fencing token", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`, `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`)

	// LessonPlanNext shows the scan.
	LessonPlanNext = auditOn("audit: query plan of the lesson claim's select", `EXPLAIN QUERY PLAN
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `EXPLAIN (COSTS OFF)
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)
)

// The indexed claim's statements: the lesson's predicate on the
// unprocessed-messages index.
var (
	// IndexedSelectNext walks the partial index from the oldest entry.
	// On PostgreSQL it locks the row it selects, skipping rows another
	// worker has locked.
	IndexedSelectNext = namedOn("indexed claim: select the oldest claimable on the unprocessed-messages index", `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)

	// IndexedClaimOne takes the selected message with the predicate repeated.
	IndexedClaimOne = named("indexed claim: take it only if still claimable, with a new fencing token", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id = :id
  AND ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))`)

	// IndexedClaimBatch takes up to :limit messages in one statement. On
	// PostgreSQL its subquery locks the rows it picks, skipping locked
	// ones, and the take repeats the predicate, as ClaimOne does.
	IndexedClaimBatch = namedOn("indexed claim: take up to :limit of the oldest claimable, each with a new fencing token", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`, `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
  AND ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`)

	// IndexedPlanNext shows the index walk.
	IndexedPlanNext = auditOn("audit: query plan of the indexed claim's select", `EXPLAIN QUERY PLAN
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `EXPLAIN (COSTS OFF)
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)
)

// The skip-locked claim's statements, PostgreSQL only: the indexed
// claim's predicate in one UPDATE whose subquery locks what it picks.
var (
	// SkipLockedClaimBatch takes up to :limit messages, one or more, in
	// one statement. The row lock taken in the subquery is the whole
	// guard: no other worker can pick a locked row, and a row that
	// changed before its lock was granted is checked again by PostgreSQL.
	SkipLockedClaimBatch = named("skip-locked claim: take up to :limit of the oldest claimable in one statement, locking them, each with a new fencing token", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`)

	// SkipLockedPlanNext shows the subquery's walk of the partial index.
	SkipLockedPlanNext = audit("audit: query plan of the skip-locked claim's subquery", `EXPLAIN (COSTS OFF)
SELECT Id FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
ORDER BY CreatedAtUtc, Id
LIMIT :limit
FOR UPDATE SKIP LOCKED`)
)

// The pending-only mistake: each statement of the indexed claim without
// the expired-lease half of its predicate.
var (
	// PendingOnlySelectNext never sees a message whose lease expired.
	PendingOnlySelectNext = mistakeOn(&IndexedSelectNext,
		"drops the expired-lease half OR (Status = 'Processing' AND LockedUntilUtc <= :now)",
		"pending-only claim: select the oldest Pending (MISTAKE)", `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)

	// PendingOnlyClaimOne takes a message only while it is Pending.
	PendingOnlyClaimOne = mistake(&IndexedClaimOne,
		"drops the expired-lease half OR (Status = 'Processing' AND LockedUntilUtc <= :now)",
		"pending-only claim: take it only if still Pending (MISTAKE)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id = :id
  AND ProcessedAtUtc IS NULL
  AND Status = 'Pending'`)

	// PendingOnlyClaimBatch takes up to :limit Pending messages.
	PendingOnlyClaimBatch = mistakeOn(&IndexedClaimBatch,
		"drops the expired-lease half OR (Status = 'Processing' AND LockedUntilUtc <= :now)",
		"pending-only claim: take up to :limit of the oldest Pending (MISTAKE)", `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND Status = 'Pending'
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit)
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`, `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until,
    ClaimToken = ClaimToken + 1
WHERE Id IN (
    SELECT Id FROM OutboxMessages
    WHERE ProcessedAtUtc IS NULL
      AND Status = 'Pending'
    ORDER BY CreatedAtUtc, Id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED)
  AND ProcessedAtUtc IS NULL
  AND Status = 'Pending'
RETURNING Id, AggregateKey, Payload, CreatedAtUtc, LockedUntilUtc, ClaimToken`)

	// PendingOnlyPlanNext is the lab's read of the mistake's plan: the same
	// index walk as the indexed claim's.
	PendingOnlyPlanNext = auditOf(&IndexedPlanNext, "reads the plan of the Pending-only select the mistake runs",
		"audit: query plan of the pending-only claim's select", `EXPLAIN QUERY PLAN
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1`, `EXPLAIN (COSTS OFF)
SELECT Id, AggregateKey, Payload, CreatedAtUtc, ClaimToken
FROM OutboxMessages
WHERE ProcessedAtUtc IS NULL
  AND Status = 'Pending'
ORDER BY CreatedAtUtc, Id
LIMIT 1
FOR UPDATE SKIP LOCKED`)
)

// The finalizations of session 21: the lesson's, fenced, and the mistake.
var (
	// ScaleFinalize completes a message only while this worker owns it
	// under the token its claim returned. A stale owner changes 0 rows.
	ScaleFinalize = named("finalize: only while I own it under my token", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id
  AND Status = 'Processing'
  AND LockedBy = :worker
  AND ClaimToken = :token`)

	// ScaleFinalizeBatch completes a batch, each row under its own token.
	// PostgreSQL reads the pairs with jsonb_array_elements.
	ScaleFinalizeBatch = namedOn("finalize a batch: each row only while I own it under its token", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM (SELECT value ->> 0 AS Id, value ->> 1 AS Token FROM json_each(:claims)) AS Claimed
WHERE OutboxMessages.Id = Claimed.Id
  AND OutboxMessages.Status = 'Processing'
  AND OutboxMessages.LockedBy = :worker
  AND OutboxMessages.ClaimToken = Claimed.Token
RETURNING OutboxMessages.Id`, `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
FROM (SELECT (value ->> 0)::bigint AS Id, (value ->> 1)::bigint AS Token
      FROM jsonb_array_elements(CAST(:claims AS jsonb)) AS value) AS Claimed
WHERE OutboxMessages.Id = Claimed.Id
  AND OutboxMessages.Status = 'Processing'
  AND OutboxMessages.LockedBy = :worker
  AND OutboxMessages.ClaimToken = Claimed.Token
RETURNING OutboxMessages.Id`)

	// ScaleFinalizeByID is the mistake: completion by Id alone. A worker
	// whose lease expired still completes, and so does the one who took over.
	ScaleFinalizeByID = mistake(&ScaleFinalize,
		"drops the owner and token guard AND Status = 'Processing' AND LockedBy = :worker AND ClaimToken = :token",
		"finalize by Id alone (MISTAKE)", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id = :id`)

	// ScaleFinalizeBatchByID is the same mistake for a batch.
	ScaleFinalizeBatchByID = mistakeOn(&ScaleFinalizeBatch,
		"drops the owner and token guard: completes every Id of :claims, whoever owns it under whatever token",
		"finalize a batch by Id alone (MISTAKE)", `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id IN (SELECT value ->> 0 FROM json_each(:claims))
RETURNING Id`, `UPDATE OutboxMessages
SET Status = 'Processed', ProcessedAtUtc = :now
WHERE Id IN (SELECT (value ->> 0)::bigint FROM jsonb_array_elements(CAST(:claims AS jsonb)) AS value)
RETURNING Id`)
)

// migration021 is migration 021 as the catalogue names it: the statement
// [DropClaimIndex] undoes.
var migration021 = catalogue[ClaimsAtScale.SQL]

// DropClaimIndex is the unindexed-claim mistake, applied after
// [ClaimsAtScale]: the indexed claim ships without the index it was
// written for, and falls back to reading the whole table.
var DropClaimIndex = mistake(migration021,
	"undoes migration 021: drops the partial index the indexed claim walks",
	"schema: 021 without its index (MISTAKE)", `DROP INDEX IF EXISTS IX_OutboxMessages_Unprocessed_CreatedAtUtc_Id`)

// WithoutClaimIndex is [DropClaimIndex] as a schema step.
var WithoutClaimIndex = Migration{Name: "021 without its index (MISTAKE)", SQL: DropClaimIndex.SQL}

// DrainFillfactor is the percent of each page [RoomForVersions] fills:
// a quarter, so a message's row has room for three more versions beside
// it (a drain writes two, its claim's and its finalize's, and a re-take a
// few more).
const DrainFillfactor = 25

// The lab's statements around the claim path: seeding, audits, the
// connection's busy handler, and the bench's ceiling.
var (
	// SeedBacklogMessage writes one Pending message of a seeded backlog.
	// Parameters: :key, :payload, :created.
	SeedBacklogMessage = audit("lab: seed one Pending backlog message", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
VALUES ('BacklogMessage', :key, :payload, 'Pending', :created)`)

	// AnalyzeBacklog gathers the planner's statistics of a freshly seeded
	// backlog on PostgreSQL, as autovacuum would within a minute of the
	// inserts. Without them the planner guesses that few rows are
	// claimable, reads them all through a bitmap and sorts them, instead
	// of walking the partial index in order and stopping at the first.
	AnalyzeBacklog = audit("lab: gather the planner's statistics of the seeded backlog (PostgreSQL)", `ANALYZE OutboxMessages`)

	// RoomForVersions leaves three quarters of each page of a lesson's
	// backlog free on PostgreSQL ([DrainFillfactor], set before the seed's
	// inserts), room for the row versions a drain writes (a claim's and a
	// finalize's per message, plus a few): PostgreSQL writes an updated
	// row's new version into its page when it fits, so the table keeps
	// the pages it was seeded on whether or not the old versions could be
	// pruned yet, which any transaction open on the server postpones. The
	// planner scales its statistics by the table's pages, so on a table
	// that grew mid-drain it switched plans mid-drain (an update by Id from
	// a scan of a few pages to the primary key), more often on a busy
	// server: a 50-message drain read 123 rows per message in most runs
	// and 89 or 39 in a few.
	RoomForVersions = audit(fmt.Sprintf("lab: fill %d%% of each page, so the drain's row versions fit beside their rows and the table keeps its pages, and the planner its plans (PostgreSQL)", DrainFillfactor),
		fmt.Sprintf(`ALTER TABLE OutboxMessages SET (fillfactor = %d)`, DrainFillfactor))

	// DrainedTablePages is how many pages the drained table fills on
	// PostgreSQL, read before and after a drain: with [RoomForVersions]
	// the drain's row versions fit in the pages the seed filled.
	DrainedTablePages = audit("audit: the pages the drained table fills (PostgreSQL)",
		`SELECT pg_relation_size('OutboxMessages') / current_setting('block_size')::bigint`)

	// QuietBacklog turns autovacuum off for the drain's table on
	// PostgreSQL: an autovacuum or autoanalyze pass that lands in one
	// drain and not the other (as it does when the server is busy) would
	// change the table's statistics, and with them the plans whose rows
	// a drain's cost counts ([SchemaRowReads]). The statistics come from
	// AnalyzeBacklog instead.
	QuietBacklog = audit("lab: keep autovacuum off the drained table, so no pass changes its statistics and plans during a drain (PostgreSQL)",
		`ALTER TABLE OutboxMessages SET (autovacuum_enabled = false)`)

	// CountUnprocessed counts messages a drain left behind.
	CountUnprocessed = audit("audit: count the messages a drain left unprocessed", `SELECT count(*) FROM OutboxMessages WHERE Status <> 'Processed'`)

	// ReadMessageState reads back one message's state: what a worker whose
	// finalize (or a completer whose batch completion) changed 0 rows reads
	// to tell a fence from work it had already done itself.
	ReadMessageState = audit("audit: read back one message's status, owner, token and processed time",
		`SELECT Status, LockedBy, ClaimToken, ProcessedAtUtc FROM OutboxMessages WHERE Id = :id`)

	// CountReclaims counts claims beyond the first of each message, from
	// the fencing token every claim increments. Where no lease expires (a
	// bench cell), each of them is a duplicate.
	CountReclaims = audit("audit: count claims beyond each message's first (from its fencing token)", `SELECT coalesce(sum(ClaimToken - 1), 0) FROM OutboxMessages WHERE ClaimToken > 1`)

	// ReadSQLiteVersion reads the version of the SQLite library.
	ReadSQLiteVersion = audit("lab: read the SQLite library's version", `SELECT sqlite_version()`)

	// ReadServerVersion reads the version of the PostgreSQL server.
	ReadServerVersion = audit("lab: read the PostgreSQL server's version", `SHOW server_version`)

	// FlushStatistics makes a PostgreSQL connection send the statistics it
	// has gathered (the rows its scans read, among others) to the server's
	// counters before it reports itself idle, instead of up to a second
	// later, so a read of [SchemaRowReads] after it counts that
	// connection's work. PostgreSQL 15 and later.
	FlushStatistics = audit("lab: flush this connection's statistics to the server's counters", `SELECT pg_stat_force_next_flush()`)

	// SchemaRowReads is how many live rows PostgreSQL's scans have read
	// from the run schema's tables since they were created: every row a
	// sequential scan returned (seq_tup_read) plus every row an index scan
	// fetched from its table (idx_tup_fetch), as the server's statistics
	// count them. Unlike the pages a scan reads, it does not count the
	// dead row versions a scan passes, whose number depends on when they
	// can be pruned, and so on every transaction open on the server.
	SchemaRowReads = audit("audit: live rows read from the schema's tables (sequential scans' rows plus index scans' fetches)", `SELECT coalesce(sum(seq_tup_read + coalesce(idx_tup_fetch, 0)), 0)
FROM pg_stat_user_tables
WHERE schemaname = current_schema()`)

	// BusyHandlerOff turns SQLite's busy handler off on a claimer's
	// connection: SQLITE_BUSY comes back at once and the claimer's own
	// [Retry] waits.
	BusyHandlerOff = audit("lab: busy handler off (the claimer retries)", `PRAGMA busy_timeout = 0`)

	// BusyHandlerOneSecond lets SQLite's busy handler wait up to a second
	// (sleeps of 1 to 100 ms) before SQLITE_BUSY comes back.
	BusyHandlerOneSecond = audit("lab: let SQLite's busy handler wait up to 1 s", `PRAGMA busy_timeout = 1000`)

	// CeilingTable is the bench's reference table. The bench keeps it in a
	// file of its own with the same settings as the drained backlogs.
	CeilingTable = auditOn("bench: create the ceiling table and its one row", `CREATE TABLE IF NOT EXISTS BenchCeiling (Id INTEGER PRIMARY KEY, Hits INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO BenchCeiling (Id) VALUES (1)`, `CREATE TABLE IF NOT EXISTS BenchCeiling (Id BIGINT PRIMARY KEY, Hits BIGINT NOT NULL DEFAULT 0);
INSERT INTO BenchCeiling (Id) VALUES (1) ON CONFLICT DO NOTHING`)

	// CeilingUpdate is the cheapest useful write transaction: one row by
	// primary key, one unindexed column. Its rate is the ceiling of any
	// claim path with the same settings.
	CeilingUpdate = named("bench: the ceiling transaction, one row by primary key", `UPDATE BenchCeiling SET Hits = Hits + 1 WHERE Id = 1`)

	// CeilingHits reads how many ceiling transactions committed.
	CeilingHits = audit("audit: read the ceiling's count of committed transactions", `SELECT Hits FROM BenchCeiling WHERE Id = 1`)
)
