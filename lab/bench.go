package lab

import "time"

// The results of `outboxlab bench`, as plain data: the bench engine fills
// them, reports render them.

// BenchReport is everything one bench run measured, as plain data.
type BenchReport struct {
	Machine BenchMachine
	// Engine is "sqlite" or "postgres"; Server, on PostgreSQL, is the
	// server's URL without its password.
	Engine      string
	Server      string
	Synchronous string
	Retry       string       // "lab" or "sqlite"
	RetryAbout  string       // what that retry does, with its figures
	Ceiling     BenchCeiling // measured before the matrix; every ratio uses it
	// CeilingAfter is the same measurement after the matrix: how far the
	// machine drifted while the matrix ran (other load, thermal, cache).
	CeilingAfter BenchCeiling
	Rows         []BenchRow
	// PeakMemory says how peak_rss_mb was measured.
	PeakMemory string
	// RiverAbout, when River ran beside the lab's claims, says how.
	RiverAbout string
	// GoqiteAbout, when goqite ran beside them (SQLite), says how.
	GoqiteAbout string
	// FetchAheadAbout, when the fetch-ahead design ran, gives its shape and
	// its completer's settings.
	FetchAheadAbout string
}

// BenchMachine is what the run ran on.
type BenchMachine struct {
	CPUs      int    // runtime.NumCPU
	CPU       string // model name from /proc/cpuinfo, if readable
	GoVersion string
	OSArch    string
	SQLite    string // SQLite library version
	Postgres  string // PostgreSQL server version, on PostgreSQL
}

// BenchCeiling is the reference rate: a prepared single-row UPDATE of an
// unindexed column by primary key, one BEGIN IMMEDIATE transaction each, on
// a file with the same settings, one connection.
type BenchCeiling struct {
	TxPerS       float64 // median of the rounds
	MsgsPerS     float64 // TxPerS / 2: a message needs a claim and a finalize
	Transactions int     // over all rounds
	Rounds       []float64
	// Server, on PostgreSQL, is what the server did in the background
	// while the ceiling was measured.
	Server *BenchServer
}

// BenchServer is what a PostgreSQL server did in the background during one
// measurement (a cell's drain, or the ceiling), from its cumulative
// statistics: the checkpoints, what they and the backends wrote, the
// write-ahead log and autovacuum. The JSON keys are the bench's contract.
type BenchServer struct {
	// CheckpointForced says a CHECKPOINT ran just before the measurement
	// (the bench's default), CheckpointMs how long it took; CheckpointRefused
	// says why not, when the login may not.
	CheckpointForced  bool    `json:"checkpoint_forced"`
	CheckpointMs      float64 `json:"checkpoint_ms"`
	CheckpointRefused string  `json:"checkpoint_refused,omitempty"`
	// Checkpoints started during the measurement (timed or requested).
	Checkpoints       int64   `json:"checkpoints"`
	BuffersCheckpoint int64   `json:"buffers_checkpoint"`  // written by the checkpointer
	BuffersBackend    int64   `json:"buffers_backend"`     // written by backends to evict them
	WALMB             float64 `json:"wal_mb"`              // write-ahead log written
	Autovacuums       int64   `json:"autovacuums"`         // autovacuum and autoanalyze runs
	CatalogDeadTuples int64   `json:"catalog_dead_tuples"` // dead row versions in the system catalogs, at the end
}

// BenchRow is one cell of the matrix. The JSON keys are the bench's contract.
type BenchRow struct {
	Messages        int     `json:"messages"`
	Workers         int     `json:"workers"`
	Claim           string  `json:"claim"`
	Batch           int     `json:"batch"`
	MsgsPerS        float64 `json:"msgs_per_s"`
	CeilingMsgsPerS float64 `json:"ceiling_msgs_per_s"`
	CeilingRatio    float64 `json:"ceiling_ratio"`
	P50Ms           float64 `json:"p50_ms"` // claim latency, first BEGIN to COMMIT, retries included
	P99Ms           float64 `json:"p99_ms"`
	BusyRetries     int64   `json:"busy_retries"` // claims and finalizes
	Errors          int64   `json:"errors"`       // claims or finalizes that returned an error
	Duplicates      int64   `json:"duplicates"`   // claims beyond the first of a message
	Lost            int64   `json:"lost"`         // messages not Processed after the drain, from the database
	PeakRSSMB       float64 `json:"peak_rss_mb"`

	// CompleteP50Ms and CompleteP99Ms are the completion lag: from the end
	// of a message's work to the commit of the transaction that completed
	// it (its finalize, or the fetch-ahead completer's batch), retries
	// included; 0 where the bench cannot see it (River, goqite).
	CompleteP50Ms float64 `json:"complete_lag_p50_ms"`
	CompleteP99Ms float64 `json:"complete_lag_p99_ms"`
	// Rejected counts completions the owner-and-token guard refused
	// (expected 0 in a bench cell: no lease expires during a drain).
	Rejected int64 `json:"refused"`

	// MeanFetch and MeanCompletion, for fetch-ahead, are the messages per
	// fetch statement and per completion statement, on average: the
	// batches River's shape makes of its own.
	MeanFetch      float64 `json:"-"`
	MeanCompletion float64 `json:"-"`
	// Server, on PostgreSQL, is what the server did in the background
	// during the cell's drain.
	Server *BenchServer `json:"server,omitempty"`
	// Peer marks a queue measured beside the lab's designs (River,
	// goqite): it has no batch, claim latency or worker split of its own.
	Peer bool `json:"-"`

	LongestWaitMs float64       `json:"-"` // the slowest claim or finalize, retries included
	WorkerShares  []float64     `json:"-"` // each worker's share of the messages, in worker order
	Drain         time.Duration `json:"-"`
}
