package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

// BenchText writes a bench run as text: the machine and settings, the
// ceiling, one table row per cell, and how to read the columns.
func BenchText(w io.Writer, rep *lab.BenchReport) error {
	var b strings.Builder
	m := rep.Machine
	cpu := ""
	if m.CPU != "" {
		cpu = " (" + m.CPU + ")"
	}
	fmt.Fprintf(&b, "outboxlab bench\n%s\n", strings.Repeat("=", 78))
	begin := "BEGIN IMMEDIATE"
	if rep.Engine == "postgres" {
		begin = "BEGIN"
		fmt.Fprintf(&b, "%-9s %d CPUs%s, %s %s, PostgreSQL %s\n", "Machine:", m.CPUs, cpu, m.GoVersion, m.OSArch, m.Postgres)
		fmt.Fprintf(&b, "%-9s %s, each cell in a schema of its own\n", "Server:", rep.Server)
		fmt.Fprintf(&b, "%-9s READ COMMITTED, prepared statements, one connection per worker\n", "Settings:")
	} else {
		fmt.Fprintf(&b, "%-9s %d CPUs%s, %s %s, SQLite %s\n", "Machine:", m.CPUs, cpu, m.GoVersion, m.OSArch, m.SQLite)
		fmt.Fprintf(&b, "%-9s WAL, synchronous %s, BEGIN IMMEDIATE, prepared statements, one connection per worker\n", "Settings:", rep.Synchronous)
	}
	fmt.Fprintf(&b, "%-9s %s\n", "Retry:", rep.RetryAbout)
	c := rep.Ceiling
	fmt.Fprintf(&b, "%-9s %.0f transactions/s (median of %d rounds, %d transactions): a prepared single-row UPDATE\n", "Ceiling:", c.TxPerS, len(c.Rounds), c.Transactions)
	fmt.Fprintf(&b, "%-9s of an unindexed column by primary key, one %s each, one connection.\n", "", begin)
	fmt.Fprintf(&b, "%-9s A message needs two transactions (claim, finalize): ceiling %.0f msgs/s.\n", "", c.MsgsPerS)
	if a := rep.CeilingAfter; a.TxPerS > 0 {
		fmt.Fprintf(&b, "%-9s Measured again after the matrix: %.0f transactions/s (%+.0f%%); ratios use the first.\n", "", a.TxPerS, 100*(a.TxPerS/c.TxPerS-1))
	}
	if c.Server != nil {
		fmt.Fprintf(&b, "%-9s Server meanwhile: before, %s; after, %s.\n", "", serverSummary(c.Server), serverSummary(rep.CeilingAfter.Server))
	}
	fmt.Fprintf(&b, "%-9s %s\n", "Memory:", rep.PeakMemory)
	if rep.FetchAheadAbout != "" {
		fmt.Fprintf(&b, "%-9s fetch-ahead, %s\n", "Fetch:", rep.FetchAheadAbout)
	}
	if rep.RiverAbout != "" {
		fmt.Fprintf(&b, "%-9s %s\n", "River:", rep.RiverAbout)
	}
	if rep.GoqiteAbout != "" {
		fmt.Fprintf(&b, "%-9s %s\n", "goqite:", rep.GoqiteAbout)
	}
	b.WriteString("\n")
	if err := writeFitted(w, b.String(), strings.Repeat(" ", 10)); err != nil {
		return err
	}

	t := lab.Table{Columns: []string{"Messages", "Workers", "Claim", "Batch", "msgs/s", "x ceiling",
		"Claim p50 ms", "Claim p99 ms", "Lag p50/p99 ms", "BUSY retries", "Longest wait ms", "Worker split", "Errors", "Dup", "Lost", "Refused", "Peak MB"}}
	if rep.Engine == "postgres" {
		t.Columns[9] = "Lock retries"
	}
	for _, r := range rep.Rows {
		if r.Peer { // River, goqite: no batch, claim latency or split of its own
			t.AddRow(r.Messages, r.Workers, r.Claim, "-", fmt.Sprintf("%.0f", r.MsgsPerS), fmt.Sprintf("%.2f", r.CeilingRatio),
				"-", "-", "-", "-", "-", "-", r.Errors, r.Duplicates, r.Lost, "-", fmt.Sprintf("%.0f", r.PeakRSSMB))
			continue
		}
		batch := any(r.Batch)
		if r.Batch == 0 { // fetch-ahead: messages per fetch / per completion, on average
			batch = fmt.Sprintf("%.1f/%.0f", r.MeanFetch, r.MeanCompletion)
		}
		t.AddRow(r.Messages, r.Workers, r.Claim, batch, fmt.Sprintf("%.0f", r.MsgsPerS), fmt.Sprintf("%.2f", r.CeilingRatio),
			fmt.Sprintf("%.3f", r.P50Ms), fmt.Sprintf("%.2f", r.P99Ms), fmt.Sprintf("%.2f/%.2f", r.CompleteP50Ms, r.CompleteP99Ms),
			r.BusyRetries, fmt.Sprintf("%.1f", r.LongestWaitMs),
			workerSplit(r.WorkerShares), r.Errors, r.Duplicates, r.Lost, r.Rejected, fmt.Sprintf("%.0f", r.PeakRSSMB))
	}
	if err := WriteTable(w, t); err != nil {
		return err
	}
	if err := serverTable(w, rep); err != nil {
		return err
	}
	retries := "SQLITE_BUSY"
	if rep.Engine == "postgres" {
		retries = "lock"
	}
	_, err := fmt.Fprintf(w, `
msgs/s: messages claimed, processed (no work) and finalized per second of the drain.
Batch: messages per claim and per finalize; for fetch-ahead, the average messages
per fetch / per completion statement. x ceiling: msgs/s over the ceiling's msgs/s.
Claim p50/p99: one claim transaction (fetch-ahead: one fetch), first BEGIN to
COMMIT, %s retries included. Lag p50/p99: completion lag, from the end of a
message's work to the commit that completed it. Longest wait: the slowest claim,
fetch, finalize or completion. Worker split: each worker's share of the messages.
Dup: claims beyond the first of a message (must be 0). Lost: messages not Processed
after the drain, counted in the database (must be 0). Refused: completions the
owner-and-token guard refused (must be 0: no lease runs out during a drain).
`, retries)
	return err
}

// serverSummary says in a phrase what the server did during one
// measurement.
func serverSummary(s *lab.BenchServer) string {
	if s == nil {
		return "not read"
	}
	forced := "no CHECKPOINT forced"
	if s.CheckpointForced {
		forced = fmt.Sprintf("CHECKPOINT forced (%.0f ms)", s.CheckpointMs)
	}
	return fmt.Sprintf("%s, %d checkpoints started, %d buffers written by checkpoints and %d by backends, %.1f MB of WAL, %d autovacuum runs",
		forced, s.Checkpoints, s.BuffersCheckpoint, s.BuffersBackend, s.WALMB, s.Autovacuums)
}

// serverTable writes, on PostgreSQL, what the server did in the background
// during each row's drain.
func serverTable(w io.Writer, rep *lab.BenchReport) error {
	t := lab.Table{Columns: []string{"Messages", "Workers", "Claim", "Batch", "msgs/s", "CHECKPOINT before ms",
		"Checkpoints during", "Buffers by checkpoints", "Buffers by backends", "WAL MB", "WAL KB/msg", "Autovacuum runs", "Catalog dead rows"}}
	refused := ""
	for _, r := range rep.Rows {
		s := r.Server
		if s == nil {
			continue
		}
		forced := "-"
		if s.CheckpointForced {
			forced = fmt.Sprintf("%.0f", s.CheckpointMs)
		}
		if s.CheckpointRefused != "" {
			refused = s.CheckpointRefused
		}
		batch := any(r.Batch)
		if r.Peer {
			batch = "-"
		} else if r.Batch == 0 {
			batch = fmt.Sprintf("%.1f/%.0f", r.MeanFetch, r.MeanCompletion)
		}
		t.AddRow(r.Messages, r.Workers, r.Claim, batch, fmt.Sprintf("%.0f", r.MsgsPerS), forced, s.Checkpoints, s.BuffersCheckpoint,
			s.BuffersBackend, fmt.Sprintf("%.1f", s.WALMB), fmt.Sprintf("%.2f", 1024*s.WALMB/float64(max(r.Messages, 1))), s.Autovacuums, s.CatalogDeadTuples)
	}
	if len(t.Rows) == 0 {
		return nil
	}
	if err := writeFitted(w, "\nThe server during each drain (pg_stat_bgwriter or pg_stat_checkpointer, pg_current_wal_insert_lsn, pg_stat_all_tables):\n", ""); err != nil {
		return err
	}
	if err := WriteTable(w, t); err != nil {
		return err
	}
	if refused != "" {
		return writeFitted(w, fmt.Sprintf("CHECKPOINT was refused (%s): the rows were measured without one; a checkpoint during a drain shows in its row.\n", refused), "")
	}
	return nil
}

// writeFitted writes text line by line, each line wider than MaxLine
// wrapped at its words with its continuation lines starting with hang (see
// fitLine).
func writeFitted(w io.Writer, text, hang string) error {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		for _, l := range fitLine(line, hang) {
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// BenchJSON writes one JSON object per row of the bench.
func BenchJSON(w io.Writer, rep *lab.BenchReport) error {
	for _, r := range rep.Rows {
		if err := JSONLine(w, r); err != nil {
			return err
		}
	}
	return nil
}

func workerSplit(shares []float64) string {
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = strconv.FormatFloat(100*s, 'f', 0, 64)
	}
	return strings.Join(parts, "/") + "%"
}
