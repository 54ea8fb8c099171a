package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/store"
)

// TestPaymentWriteCrash: a crash between the payment and its outbox message
// leaves an orphan only when they are written in two transactions; what
// survives is read back on a fresh connection, as after a restart.
func TestPaymentWriteCrash(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	crash := func() bool { return true }
	pay := store.NewPayment{Key: "PAY-001", AmountCents: 2500, MessageType: "PaymentCreated", Payload: "{}"}
	tests := []struct {
		name             string
		write            func(db *store.DB) error
		payments, orphan int
		outbox           int
	}{
		{name: "OneTransactionNoCrash", payments: 1, outbox: 1, orphan: 0,
			write: func(db *store.DB) error { _, err := db.CreatePayment(ctx, pay, now); return err }},
		{name: "TwoTransactionsNoCrash", payments: 1, outbox: 1, orphan: 0,
			write: func(db *store.DB) error {
				_, err := db.CreatePaymentInTwoTransactions(ctx, pay, now, nil)
				return err
			}},
		{name: "TwoTransactionsCrash", payments: 1, outbox: 0, orphan: 1,
			write: func(db *store.DB) error {
				_, err := db.CreatePaymentInTwoTransactions(ctx, pay, now, crash)
				return err
			}},
		{name: "OneTransactionCrash", payments: 0, outbox: 0, orphan: 0,
			write: func(db *store.DB) error { return db.CreatePaymentWithFailpoint(ctx, pay, now, crash) }},
		{name: "OneTransactionFailpointNotFired", payments: 1, outbox: 1, orphan: 0,
			write: func(db *store.DB) error {
				return db.CreatePaymentWithFailpoint(ctx, pay, now, func() bool { return false })
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pay.db")
			db, err := store.Open(ctx, path, store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
				t.Fatal(err)
			}
			err = tt.write(db)
			crashed := errors.Is(err, store.ErrCrashed)
			if err != nil && !crashed {
				t.Fatal(err)
			}
			// One meaning of "crashed": the store's crash is a failpoint crash.
			if errors.Is(err, failpoint.ErrCrashed) != crashed {
				t.Fatalf("err %v: errors.Is(err, failpoint.ErrCrashed) = %v, want %v", err, !crashed, crashed)
			}
			if _, err := db.Payments(ctx); crashed == (err == nil) {
				t.Fatalf("crashed %v, yet the instance answers queries with error %v", crashed, err)
			}
			after, err := store.Open(ctx, path, store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer after.Close()
			got := map[string]int{}
			for name, q := range map[string]string{"payments": "SELECT count(*) FROM Payments", "outbox": "SELECT count(*) FROM OutboxMessages", "orphans": store.OrphanPaymentsSQL} {
				if got[name], err = after.Count(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if got["payments"] != tt.payments || got["outbox"] != tt.outbox || got["orphans"] != tt.orphan {
				t.Fatalf("after restart %v, want payments %d outbox %d orphans %d", got, tt.payments, tt.outbox, tt.orphan)
			}
			// The survivor can write again: the crash left no lock behind.
			if _, err := after.CreatePayment(ctx, store.NewPayment{Key: "PAY-002", AmountCents: 1, MessageType: "PaymentCreated", Payload: "{}"}, now); err != nil {
				t.Fatal(err)
			}
		})
	}
}
