package scenarios

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// claimKinds are the event kinds a claim ledger's outcome allows.
var claimKinds = map[string][]lab.Kind{
	"claimed":   {lab.KindClaim, lab.KindSteal},
	"blocked":   {lab.KindBlocked},
	"lost":      {lab.KindBlocked},
	"refused":   {lab.KindRefused},
	"done":      {lab.KindDone},
	"empty":     {lab.KindEmpty},
	"overreach": {lab.KindFenced},
}

// checkEventsAgreeWithLedgers reads r as a reviewer would: every ledger
// row that names a timeline event (its # column) agrees with the event the
// pictures draw from it: the rows it changed, its message, its offer, and
// for a claim the kind its outcome allows. Every event has a kind.
func checkEventsAgreeWithLedgers(t *testing.T, r *lab.Result) {
	t.Helper()
	bySeq := map[int]lab.Event{}
	for _, e := range r.Timeline {
		if e.Kind == "" {
			t.Errorf("event #%d %s %q has no kind", e.Seq, e.Actor, e.Action)
		}
		bySeq[e.Seq] = e
	}
	for _, tb := range r.Tables {
		if len(tb.Columns) == 0 || tb.Columns[0] != "#" || !strings.Contains(tb.Title, "Ledger") {
			continue
		}
		col := func(name string) int { return slices.Index(tb.Columns, name) }
		for _, row := range tb.Rows {
			seq, err := strconv.Atoi(row[0])
			if err != nil {
				continue
			}
			e, ok := bySeq[seq]
			if !ok {
				t.Errorf("%s: row %v names no timeline event", tb.Title, row)
				continue
			}
			if c := col("Rows"); c > 0 && e.Rows != nil && strconv.FormatInt(*e.Rows, 10) != row[c] {
				t.Errorf("%s: row %v says %s rows; event #%d (%s %s) drew %d", tb.Title, row, row[c], seq, e.Actor, e.Kind, *e.Rows)
			}
			if c := col("Outcome"); c > 0 {
				if kinds, known := claimKinds[row[c]]; known && !slices.Contains(kinds, e.Kind) {
					t.Errorf("%s: row %v says %s; event #%d (%s) is drawn as %s", tb.Title, row, row[c], seq, e.Actor, e.Kind)
				}
			}
			for _, name := range []string{"Event", "Key"} {
				if c := col(name); c > 0 && row[c] != "" && row[c] != "-" && e.Subject != row[c] {
					t.Errorf("%s: row %v is about %s; event #%d (%s) about %q", tb.Title, row, row[c], seq, e.Actor, e.Subject)
				}
			}
			if c := col("Offer"); c > 0 && e.Offer != 0 && strconv.FormatInt(e.Offer, 10) != row[c] {
				t.Errorf("%s: row %v names offer %s; event #%d (%s) offer %d", tb.Title, row, row[c], seq, e.Actor, e.Offer)
			}
		}
	}
}
