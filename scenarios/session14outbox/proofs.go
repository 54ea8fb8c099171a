package session14outbox

import (
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/store"
)

// Session 14 statements no variant runs, each replacing one statement of a
// phase's payment write to show a check no variant breaks can fail.
var (
	// paymentWritingNothing is a payment insert that inserts no row: the
	// "before" crash then leaves nothing behind, so no orphan.
	paymentWritingNothing = store.Stmt{Name: "test: payment insert that writes no row", SQL: `INSERT INTO Payments (IdempotencyKey, AmountCents, PaymentStatus, CreatedAtUtc, UpdatedAtUtc)
SELECT :key, :amount, 'Pending', :now, :now WHERE 0`}
	// outboxWrittenTwice writes each payment's outbox row twice.
	outboxWrittenTwice = store.Stmt{Name: "test: outbox insert that writes the row twice", SQL: `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
VALUES (:type, :key, :payload, 'Pending', :now), (:type, :key, :payload, 'Pending', :now)`}
)

// breakers are the lesson's [lesson.Breaker]s: statements no variant runs,
// each breaking checks no variant breaks.
func breakers() []lesson.Breaker {
	design := func(f func(d *outboxDesign)) func(any) any {
		return lesson.SwapOf(func(d outboxDesign) outboxDesign { f(&d); return d })
	}
	return []lesson.Breaker{
		{Name: paymentWritingNothing.Name + " (the \"before\")", Swap: design(func(d *outboxDesign) { d.before.write.Payment = paymentWritingNothing }),
			Breaks: []string{"orphans_before"}},
		{Name: outboxWrittenTwice.Name + " (the crash-free run)", Swap: design(func(d *outboxDesign) { d.crashFree.Outbox = outboxWrittenTwice }),
			Breaks: []string{"outbox_rows_per_payment"}},
	}
}

// processes is what a run of the lesson with Options.Processes starts
// ([lesson.Processes]).
var processes = lesson.Processes{SameChecks: true, Children: lesson.Always(
	lesson.Child{Phase: "before: checkout", Role: "checkout", Point: "between-outbox-writes"},
	lesson.Child{Phase: "after: checkout", Role: "checkout", Point: "between-outbox-writes"},
	lesson.Child{Phase: "crash-free run: checkout", Role: "checkout"})}
