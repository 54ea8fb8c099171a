package scenarios

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/store"
)

// TestTransactionalOutboxChecksCanFail breaks the session-14 checks the
// two-transactions variant leaves alone: a "before" written in one
// transaction leaves no orphan, and a crash between two transactions during
// the crash-free run leaves a payment without its outbox row.
func TestTransactionalOutboxChecksCanFail(t *testing.T) {
	last := seedPayments[len(seedPayments)-1].Key
	tests := []struct {
		name string
		edit func(w *paymentWrites)
		plan *failpoint.Plan
		want string
	}{
		{name: "BeforeInOneTransaction", want: "orphans_before",
			edit: func(w *paymentWrites) { w.before = oneTransactionWithFailpoint }},
		{name: "CrashDuringCrashFreeRun", want: "outbox_rows_per_payment",
			edit: func(w *paymentWrites) { w.crashFree = twoTransactions },
			plan: failpoint.NewPlan(failpoint.Rule{Point: failpoint.BetweenOutboxWrites, Subject: last, Fault: failpoint.Crash})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := paymentWritesFor("")
			tt.edit(&w)
			env := &Env{Scenario: &transactionalOutbox, Dir: t.TempDir()}
			r, err := runTransactionalOutboxWithPlan(context.Background(), env, w, tt.plan)
			if err != nil {
				t.Fatal(err)
			}
			if failed := r.FailedChecks(); !slices.Equal(failed, []string{tt.want}) {
				t.Fatalf("failed checks %v, want [%s]", failed, tt.want)
			}
		})
	}
}

// TestTransactionalOutboxCrashIsReal: the crashed checkout instance cannot
// be used again, like a dead process.
func TestTransactionalOutboxCrashIsReal(t *testing.T) {
	ctx := context.Background()
	env := &Env{Scenario: &transactionalOutbox, Dir: t.TempDir()}
	db, err := openWorker(ctx, env.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	p := crashedPayment
	p.MessageType, p.Payload = "PaymentCreated", "{}"
	crash := func() bool { return true }
	if err := oneTransactionWithFailpoint.write(ctx, db, p, lessonStart, crash); !errors.Is(err, store.ErrCrashed) {
		t.Fatalf("write = %v, want ErrCrashed", err)
	}
	if _, err := db.CreatePayment(ctx, p, lessonStart); err == nil {
		t.Fatal("the crashed instance wrote again")
	}
}
