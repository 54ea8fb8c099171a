package session21scale

import (
	"fmt"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// ScaleWording is what session 21's drains and plans tables say on one
// engine: the unit cost is counted in and how, what a retry is, and how
// to read a plan.
type ScaleWording struct {
	// Unit is what a drain's cost counts ("pages" or "rows"); it names
	// the per-message metrics (lesson_<unit>_per_message_small) and the
	// drains table's cost column.
	Unit string
	// Retried names what a drain's retry count counts.
	Retried                                              string
	costColumn, costNote, retries, plansTitle, plansNote string
}

// ScaleWords are the tables' words per engine.
var ScaleWords = map[store.Engine]ScaleWording{
	store.SQLite: {
		Unit:       "pages",
		Retried:    "SQLITE_BUSY retries",
		costColumn: "Pages/msg",
		costNote: "Pages/msg is what SQLite read per message (claim and finalize; sqlite3_db_status cache hits plus misses on the " +
			"drain workers' connections), near-repeatable: the checks compare it.",
		retries:    "BUSY retries",
		plansTitle: "Query plans (EXPLAIN QUERY PLAN of each claim's select, on its large backlog)",
		plansNote:  "SCAN OutboxMessages reads every row; SCAN … USING INDEX walks the partial index from the oldest unprocessed message.",
	},
	store.Postgres: {
		Unit:       "rows",
		Retried:    "retried transactions (serialization failure, deadlock or lock not available)",
		costColumn: "Rows/msg",
		costNote: "Rows/msg is what PostgreSQL's scans read per message: the live rows of the drain's tables that its " +
			"sequential scans returned (seq_tup_read) plus those its index scans fetched (idx_tup_fetch), from " +
			"pg_stat_user_tables, read before and after the drain once every connection had flushed its statistics " +
			"(pg_stat_force_next_flush). It counts the drain workers' claims and finalizes, the empty claim that ends " +
			"each worker's loop included, as each statement's plan read them. Each backlog was seeded with " +
			fmt.Sprintf("%d%% of every page free (fillfactor %d)", 100-store.DrainFillfactor, store.DrainFillfactor) +
			", room for the row versions the drain writes, so that the table keeps its pages (the timeline's drained " +
			"line gives them, before and after) and the planner, which scales its statistics by them, its plans. " +
			"Rows, not the pages scans read: those include the dead row versions a scan passes, and how many are left " +
			"depends on when they can be pruned, which any transaction open on the server postpones, so they move " +
			"with the machine's load; live rows do not: the checks compare them.",
		retries:    "Lock retries",
		plansTitle: "Query plans (EXPLAIN (COSTS OFF) of each claim's select, parameters bound, on its large backlog)",
		plansNote: "Seq Scan on outboxmessages reads every row and Sort orders them all; Index Scan using " +
			"ix_outboxmessages_unprocessed_createdatutc_id walks the partial index from the oldest unprocessed message. " +
			"LockRows is FOR UPDATE SKIP LOCKED: the claim locks the row it takes and skips rows other workers hold.",
	},
}

// ScaleTables renders session 21's drains in words: their cost per
// message, the query plans, the forced expiries and the stalled worker's
// re-take. drainers are the drain workers, in the order the split names
// them.
func ScaleTables(drains []*ScaleDrain, words ScaleWording, drainers []string) []lab.Table {
	cost := lab.Table{
		Title: "Drains: cost per message",
		Note: words.costNote + " µs/msg is the median claim transaction " +
			"plus the median finalize transaction, BEGIN to COMMIT of the committed attempt: real time, so it varies with the " +
			"machine and what else runs on it.",
		Interleaved:    true,
		VaryingColumns: []string{words.costColumn, "µs/msg", words.retries, "Split"},
		Columns:        []string{"Claim", "Backlog", "Messages", words.costColumn, "µs/msg", "Claims", "Empty claims", words.retries, "Split", "Duplicates", "Lost"},
	}
	plans := lab.Table{
		Title:   words.plansTitle,
		Note:    words.plansNote,
		Columns: []string{"Claim", "Plan"},
	}
	expiries := lab.Table{
		Title: "Forced lease expiry: who held what, who took it over",
		Note: "Worker-A crashed holding the oldest message; Worker-B stalled holding the next. After the leases expired the " +
			"drain reclaimed both with a new token; Worker-B's late finalize presented its old one.",
		Interleaved:    true,
		VaryingColumns: []string{"Reclaimed by (token)"},
		Columns:        []string{"Claim", "Backlog", "Message", "Held by", "Token", "Reclaimed by (token)", "Late finalize", "Committed finalizations"},
	}
	for _, d := range drains {
		split := d.CommittedBy()
		cost.AddRow(d.Claim.Name, fmt.Sprintf("%d (%s)", d.Backlog, d.Size), d.Drained, lab.FormatNumber(d.ReadsPerMessage()),
			lab.FormatNumber(d.UsPerMessage()), len(d.Claims), d.Empty, d.Busy,
			fmt.Sprintf("%s %d, %s %d", drainers[0], split[drainers[0]], drainers[1], split[drainers[1]]),
			d.Duplicates(), d.Lost)
		if d.Size == "large" {
			plans.AddRow(d.Claim.Name, strings.Join(d.Plan, " / "))
		}
		for _, e := range d.Expiries {
			expiries.AddRow(d.Claim.Name, d.Backlog, e.ID, e.Holder, e.Token, strings.Join(d.TakenOver(e), ", "), e.Late, d.CommittedOf(e.ID))
		}
	}
	return []lab.Table{cost, plans, expiries, retakeTable(drains)}
}

// retakeTable is each drain's re-take step: the stalled worker's stale
// finalize against its own newer claim.
func retakeTable(drains []*ScaleDrain) lab.Table {
	t := lab.Table{
		Title: "Re-take by the same worker: only the token tells its two claims apart",
		Note: "After each drain Worker-B claims one new message and stalls past its lease; Worker-B again (a second " +
			"claimer under the same name) claims it under a newer token. The row is Processing and LockedBy Worker-B " +
			"when the first claimer's late finalize arrives, so Status and LockedBy let it through: only ClaimToken " +
			"refuses it. Retried finalize: the second claimer sends its committed finalize again, same name and token, as " +
			"a retry after a lost reply would; (done) marks 0 rows on a row it read back Processed under its own name " +
			"and token.",
		Columns: []string{"Claim", "Backlog", "Message", "Stale token", "Newer token", "Stale finalize", "Newer finalize", "Retried finalize"},
	}
	rows := func(n int) string {
		switch n {
		case -1:
			return "-"
		case 1:
			return "1 row"
		}
		return fmt.Sprintf("%d rows", n)
	}
	for _, d := range drains {
		if r := d.Retake; r.Ran() {
			newer := "-"
			if r.Newer != 0 {
				newer = fmt.Sprint(r.Newer)
			}
			retry := rows(r.RetryRows)
			if r.RetryDone {
				retry += " (done)"
			}
			t.AddRow(d.Claim.Name, d.Backlog, r.ID, r.Stale, newer, rows(r.StaleRows), rows(r.NewerRows), retry)
		}
	}
	return t
}
