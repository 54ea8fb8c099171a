package session14outbox

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/store"
)

// TestTransactionalOutboxChecksCanFail breaks the session-14 checks that no
// statement swap can break, because the crash is not a statement: it is the
// failpoint plan and a closed connection. A crash during the crash-free run
// leaves a payment without its outbox row (and never reaches the provider);
// a phase whose crash never happens measures no orphan count and registers
// its payment at the provider a second time; an "after" whose crash does
// not really kill the instance measures no orphan count. Each case runs
// the lesson with a changed design, never with values the test sets.
func TestTransactionalOutboxChecksCanFail(t *testing.T) {
	t.Parallel()
	last := cast.SeedPayments[len(cast.SeedPayments)-1].Key
	// survivesCrash commits both rows, then consults the failpoint and
	// reports a crash while its connection lives on.
	survivesCrash := crashPhaseDesign{write: store.PaymentWriteLesson,
		wrap: func(c instance.Checkout) instance.Checkout { return survivor{c} }}
	tests := []struct {
		name string
		edit func(d *outboxDesign)
		want []string
	}{
		{name: "CrashDuringCrashFreeRun", want: []string{"outbox_rows_per_payment", "keys_not_created_exactly_once"},
			edit: func(d *outboxDesign) {
				d.crashFree = store.PaymentWriteTwoTransactions
				d.crashFreePlan = failpoint.NewPlan(failpoint.Rule{Point: failpoint.BetweenOutboxWrites, Subject: last, Fault: failpoint.Crash})
			}},
		{name: "AfterNeverCrashes", want: []string{"orphans_after", "rows_after_crash", "crashes_injected", "keys_not_created_exactly_once"},
			edit: func(d *outboxDesign) { d.after.disarm = true }},
		{name: "BeforeNeverCrashes", want: []string{"orphans_before", "crashes_injected", "keys_not_created_exactly_once"},
			edit: func(d *outboxDesign) { d.before = crashPhaseDesign{write: store.PaymentWriteLesson, disarm: true} }},
		{name: "AfterCrashDoesNotKill", want: []string{"orphans_after", "rows_after_crash", "crashes_injected"},
			edit: func(d *outboxDesign) { d.after = survivesCrash }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := lessontest.NewEnv(t, &Lesson)
			d := lessonOutboxDesign(env)
			tt.edit(&d)
			r, err := runTransactionalOutbox(context.Background(), env, d)
			if err != nil {
				t.Fatal(err)
			}
			if failed := r.FailedChecks(); !slices.Equal(failed, tt.want) {
				t.Fatalf("failed checks %v, want %v\nmetrics %v", failed, tt.want, r.Metrics)
			}
		})
	}
}

// survivor is a checkout that reports the failpoint's crash without
// dying: it writes both rows, asks the failpoint, and lives on.
type survivor struct{ instance.Checkout }

func (s survivor) Write(ctx context.Context, p store.NewPayment, now time.Time, crash func() bool) (instance.Written, error) {
	if _, err := s.Checkout.Write(ctx, p, now, nil); err != nil {
		return instance.Written{}, err
	}
	return instance.Written{Crashed: crash != nil && crash()}, nil
}

// TestTransactionalOutboxFigures pins the lesson's figures and the
// provider's ledger behind them: one creation call per key, six in all.
func TestTransactionalOutboxFigures(t *testing.T) {
	t.Parallel()
	r := lessontest.Must(t, &Lesson, "")
	want := map[string]float64{"orphans_before": 1, "orphans_after": 0, "rows_after_crash": 0, "crashes_injected": 2,
		"outbox_rows_per_payment": 1, "keys_not_created_exactly_once": 0, "provider_creation_calls": 6, "crash_free_payments": 6}
	for k, w := range want {
		if got, ok := r.Metric(k); !ok || got != w {
			t.Errorf("%s = %v (measured %v), want %v", k, got, ok, w)
		}
	}
}

// TestOutboxRowsPerPayment: the figure is 1 only when every payment has
// exactly one outbox row; uneven counts never average out to 1.
func TestOutboxRowsPerPayment(t *testing.T) {
	t.Parallel()
	pays := func(keys ...string) []store.Payment {
		var out []store.Payment
		for _, k := range keys {
			out = append(out, store.Payment{Key: k})
		}
		return out
	}
	rows := func(counts map[string]int) map[string][]store.Message {
		out := map[string][]store.Message{}
		for k, n := range counts {
			out[k] = make([]store.Message, n)
		}
		return out
	}
	tests := []struct {
		name   string
		pays   []store.Payment
		counts map[string]int
		want   float64
		ok     bool
	}{
		{"EveryPaymentOne", pays("A", "B", "C"), map[string]int{"A": 1, "B": 1, "C": 1}, 1, true},
		{"NoneAndTwoDoNotAverageToOne", pays("A", "B"), map[string]int{"A": 0, "B": 2}, 0, true},
		{"OneAndTwo", pays("A", "B"), map[string]int{"A": 1, "B": 2}, 2, true},
		{"AllTwo", pays("A", "B"), map[string]int{"A": 2, "B": 2}, 2, true},
		{"NoPayments", nil, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := outboxRowsPerPayment(tt.pays, rows(tt.counts))
			if got != tt.want || ok != tt.ok {
				t.Fatalf("outboxRowsPerPayment = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestTransactionalOutboxCrashIsReal: the crashed checkout instance cannot
// be used again, like a dead process.
func TestTransactionalOutboxCrashIsReal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := lessontest.NewEnv(t, &Lesson)
	db, err := env.Open(ctx, env.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	payments := store.NewPayments(db, store.PaymentWriteLesson)
	crash := func() bool { return true }
	if _, err := payments.Create(ctx, crashedPayment, cast.LessonStart, crash); !errors.Is(err, store.ErrCrashed) || !errors.Is(err, failpoint.ErrCrashed) {
		t.Fatalf("write = %v, want ErrCrashed", err)
	}
	if _, err := payments.Create(ctx, crashedPayment, cast.LessonStart, nil); err == nil {
		t.Fatal("the crashed instance wrote again")
	}
}
