package scenarios

import (
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
)

// Day 15's two scenarios, compared side by side when one invocation runs
// both as designed.
const (
	day15Before = "session-15-competing-workers-no-claim"
	day15After  = "session-15-outbox-leasing"
)

// Day15Comparison is the Day 15 article's metric table with a BEFORE and an
// AFTER column, taken from the two runs' measured figures, and its
// headline. ok is false unless before and after are those two scenarios
// run as designed, and both passed: a comparison of runs that did not show
// their lesson would teach nothing.
func Day15Comparison(before, after *lab.Result) (headline string, t lab.Table, ok bool) {
	if before == nil || after == nil || before.Scenario != day15Before || after.Scenario != day15After ||
		before.Variant != "" || after.Variant != "" || before.CustomSQL != "" || after.CustomSQL != "" ||
		!before.Passed() || !after.Passed() {
		return "", lab.Table{}, false
	}
	b, a := lesson.MetricsOf(before), lesson.MetricsOf(after)
	pair := func(m func(string) string, keys ...string) string {
		out := ""
		for i, k := range keys {
			if i > 0 {
				out += " / "
			}
			out += m(k)
		}
		return out
	}
	t = lab.Table{
		Title: "Day 15: BEFORE (loading) and AFTER (claiming), side by side",
		Note: "Every figure is the measured one of the two runs this comparison names (" + day15Before + " and " + day15After +
			", this invocation's first run of each); the AFTER worker split varies by run, its sum does not.",
		Columns: []string{"Figure", "BEFORE (loading: " + day15Before + ")", "AFTER (claiming: " + day15After + ")"},
	}
	t.AddRow("payments / outbox messages seeded", pair(b, "seeded_payments", "seeded_messages"), pair(a, "seeded_payments", "seeded_messages"))
	t.AddRow("loaded per worker (A / B), or successful claims", pair(b, "loaded_a", "loaded_b")+" loaded, none claimed",
		a("successful_claims")+" claims for "+a("unique_messages")+" messages, none loaded"+claimsBeyondMessages(after))
	t.AddRow("processing attempts", b("processing_attempts"), a("processing_attempts"))
	t.AddRow("unique messages", b("unique_messages"), a("unique_messages"))
	t.AddRow("messages processed more than once", b("processed_more_than_once"), a("processed_more_than_once"))
	t.AddRow("provider status checks", b("status_checks"), a("status_checks"))
	t.AddRow("ownership violations", "n/a: nobody owns a message", a("ownership_violations"))
	t.AddRow("worker split: messages processed by A / B", pair(b, "processed_by_a", "processed_by_b")+" (both did all)",
		pair(a, "processed_by_a", "processed_by_b")+" (recovery included)")
	t.AddRow("payments Paid / Failed / Pending", pair(b, "paid", "failed", "payments_pending"), pair(a, "paid", "failed", "payments_pending"))
	t.AddRow("messages Processed / Pending / Processing", pair(b, "outbox_processed", "outbox_pending", "outbox_processing"),
		pair(a, "outbox_processed", "outbox_pending", "outbox_processing"))
	t.AddRow("duplicate payment / outbox rows", pair(b, "duplicate_payment_rows", "duplicate_outbox_rows"),
		pair(a, "duplicate_payment_rows", "duplicate_outbox_rows"))
	t.AddRow("provider creation calls made by workers", b("worker_creation_calls"), a("worker_creation_calls"))
	t.AddRow("fake successes (transaction id not the provider's)", b("fake_successes"), a("fake_successes"))
	headline = fmt.Sprintf("The halving: %s processing attempts for %s messages before, %s after. Both final databases look the same "+
		"(%s and %s Processed, %s and %s Paid, %s and %s duplicate rows); only the ledgers show the difference: %s messages processed more "+
		"than once when loading, %s when claiming.",
		b("processing_attempts"), b("unique_messages"), a("processing_attempts"),
		b("outbox_processed"), a("outbox_processed"), b("paid"), a("paid"), b("duplicate_rows"), a("duplicate_rows"),
		b("processed_more_than_once"), a("processed_more_than_once"))
	return headline, t, true
}

// claimsBeyondMessages explains the AFTER run's claims beyond one per
// message: the recovery demo's claim that died with Worker-A, whose message
// was claimed again once its lease had expired.
func claimsBeyondMessages(after *lab.Result) string {
	claims, _ := after.Metric("successful_claims")
	messages, _ := after.Metric("unique_messages")
	switch extra := int(claims - messages); {
	case extra == 1:
		return ": one more than messages, since the recovery demo's first claim of PAY-001 died with Worker-A, and " +
			"Worker-B claimed it again after its lease expired"
	case extra > 1:
		return fmt.Sprintf(": %d more than messages, the recovery demo's crashed claim among them", extra)
	}
	return ""
}
