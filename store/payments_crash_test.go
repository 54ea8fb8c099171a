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
// survives is read back on a fresh connection, as after a restart. Every
// case runs the one path, Payments.Create, with a statement set.
func TestPaymentWriteCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	crash := func() bool { return true }
	noCrash := func() bool { return false }
	pay := store.NewPayment{Key: "PAY-001", AmountCents: 2500, MessageType: "PaymentCreated", Payload: "{}"}
	tests := []struct {
		name             string
		write            store.PaymentWrite
		crashHere        func() bool
		payments, orphan int
		outbox           int
	}{
		{"OneTransactionNoFailpoint", store.PaymentWriteLesson, nil, 1, 0, 1},
		{"OneTransactionFailpointNotFired", store.PaymentWriteLesson, noCrash, 1, 0, 1},
		{"OneTransactionCrash", store.PaymentWriteLesson, crash, 0, 0, 0},
		{"TwoTransactionsNoCrash", store.PaymentWriteTwoTransactions, noCrash, 1, 0, 1},
		{"TwoTransactionsCrash", store.PaymentWriteTwoTransactions, crash, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "pay.db")
			db, err := store.Open(ctx, path, store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
				t.Fatal(err)
			}
			payments := store.NewPayments(db, tt.write)
			_, err = payments.Create(ctx, pay, now, tt.crashHere)
			crashed := errors.Is(err, store.ErrCrashed)
			if err != nil && !crashed {
				t.Fatal(err)
			}
			// One meaning of "crashed": the store's crash is a failpoint crash.
			if errors.Is(err, failpoint.ErrCrashed) != crashed {
				t.Fatalf("err %v: errors.Is(err, failpoint.ErrCrashed) = %v, want %v", err, !crashed, crashed)
			}
			if _, err := payments.List(ctx); crashed == (err == nil) {
				t.Fatalf("crashed %v, yet the instance answers queries with error %v", crashed, err)
			}
			after, err := store.Open(ctx, path, store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer after.Close()
			got := map[string]int{}
			for name, q := range map[string]string{"payments": "SELECT count(*) FROM Payments", "outbox": "SELECT count(*) FROM OutboxMessages", "orphans": store.OrphanPayments.SQL} {
				if got[name], err = after.Count(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if got["payments"] != tt.payments || got["outbox"] != tt.outbox || got["orphans"] != tt.orphan {
				t.Fatalf("after restart %v, want payments %d outbox %d orphans %d", got, tt.payments, tt.outbox, tt.orphan)
			}
			// The survivor can write again: the crash left no lock behind.
			again := store.NewPayment{Key: "PAY-002", AmountCents: 1, MessageType: "PaymentCreated", Payload: "{}"}
			if _, err := store.NewPayments(after, store.PaymentWriteLesson).Create(ctx, again, now, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPaymentWriteLedger: the ledger sees each write's statements and
// transaction shape, and a crash mid-transaction as a rollback.
func TestPaymentWriteLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	pay := store.NewPayment{Key: "PAY-001", AmountCents: 2500, MessageType: "PaymentCreated", Payload: "{}"}
	tests := []struct {
		name      string
		write     store.PaymentWrite
		crash     bool
		committed int
		rolled    int
	}{
		{"OneTransaction", store.PaymentWriteLesson, false, 1, 0},
		{"OneTransactionCrash", store.PaymentWriteLesson, true, 0, 1},
		{"TwoTransactions", store.PaymentWriteTwoTransactions, false, 2, 0},
		{"TwoTransactionsCrash", store.PaymentWriteTwoTransactions, true, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ledger := &store.Ledger{}
			cfg := store.DefaultConfig
			cfg.Ledger = ledger
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), "pay.db"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
				t.Fatal(err)
			}
			_, err = store.NewPayments(db, tt.write).Create(ctx, pay, now, func() bool { return tt.crash })
			if (err != nil) != tt.crash {
				t.Fatalf("err = %v, want a crash %v", err, tt.crash)
			}
			if !ledger.Saw(tt.write.Payment.SQL) || ledger.Saw(tt.write.Outbox.SQL) == tt.crash {
				t.Fatalf("ledger saw payment %v, outbox %v", ledger.Saw(tt.write.Payment.SQL), ledger.Saw(tt.write.Outbox.SQL))
			}
			committed, rolled := 0, 0
			for _, tx := range ledger.Transactions() {
				if tx.Statements[0] == tt.write.Payment.Name || tx.Statements[0] == tt.write.Outbox.Name {
					committed += tx.Committed
					rolled += tx.RolledBack
				}
			}
			if committed != tt.committed || rolled != tt.rolled {
				t.Fatalf("committed %d, rolled back %d; want %d, %d", committed, rolled, tt.committed, tt.rolled)
			}
		})
	}
}
