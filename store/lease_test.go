package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

var t0 = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// withClaim is db's Day 15 outbox service with claim c and the lesson's finalization.
func withClaim(db *store.DB, c store.ClaimSQL) *store.Outbox {
	s := store.OutboxLesson
	s.Claim = c
	return store.NewOutbox(db, s)
}

// lessonOutbox is db's outbox service with the lesson's statements.
func lessonOutbox(db *store.DB) *store.Outbox { return store.NewOutbox(db, store.OutboxLesson) }

// mustOpenLeaseDB opens a fresh Day 15 database with two payments seeded
// and returns two independent application instances on it.
func mustOpenLeaseDB(tb testing.TB) (a, b *store.DB) {
	tb.Helper()
	a, path := storetest.Fresh(tb, store.DefaultConfig, store.PaymentsOutbox, store.OutboxLeasing)
	for i, key := range []string{"PAY-001", "PAY-002"} {
		p := store.NewPayment{Key: key, AmountCents: 100, MessageType: "PaymentCreated", Payload: "{}"}
		if _, err := store.NewPayments(a, store.PaymentWriteLesson).Create(context.Background(), p, t0.Add(time.Duration(i-60)*time.Second), nil); err != nil {
			tb.Fatal(err)
		}
	}
	return a, storetest.Open(tb, path, store.DefaultConfig)
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		db := storetest.Open(t, filepath.Join(t.TempDir(), "x.db"), store.DefaultConfig)
		if err := db.Migrate(ctx, store.PaymentsOutbox); err != nil {
			t.Fatal(err)
		}
		schema, err := db.Schema(ctx)
		if err != nil || len(schema) < 2 {
			t.Fatalf("schema = %v, %v", schema, err)
		}
	})
	t.Run("ErrNotDatabase", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "notes.db")
		if err := os.WriteFile(path, []byte("these are my lecture notes, not a database, padded to a page................................................................................................"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(ctx, path, store.DefaultConfig)
		if !errors.Is(err, store.ErrNotDatabase) {
			t.Fatalf("err = %v, want ErrNotDatabase", err)
		}
	})
	t.Run("ErrLocked", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "held.db")
		holder := storetest.Open(t, path, store.DefaultConfig)
		if err := holder.Migrate(ctx, store.PaymentsOutbox); err != nil {
			t.Fatal(err)
		}
		// Another process holds the file in exclusive locking mode.
		if err := holder.HoldExclusiveLock(ctx); err != nil {
			t.Fatal(err)
		}
		_, err := store.Open(ctx, path, store.Config{BusyTimeout: 50 * time.Millisecond})
		if !errors.Is(err, store.ErrLocked) {
			t.Fatalf("err = %v, want ErrLocked", err)
		}
	})
	t.Run("ErrBadSynchronous", func(t *testing.T) {
		_, err := store.Open(ctx, filepath.Join(t.TempDir(), "x.db"), store.Config{Synchronous: "sometimes"})
		if err == nil {
			t.Fatal("want an error for synchronous=sometimes")
		}
	})
}

func TestClaimNext(t *testing.T) {
	ctx := context.Background()
	const lease = 500 * time.Millisecond
	tests := []struct {
		name      string
		claimedAt time.Duration // when Worker-A claimed PAY-001, relative to t0
		bAt       time.Duration // when Worker-B tries
		claim     store.ClaimSQL
		wantKey   string // what Worker-B gets; "" for Empty
	}{
		{"LiveLeaseSkipped", 0, 499 * time.Millisecond, store.LeaseClaim, "PAY-002"},
		{"ExpiredAtLeaseEnd", 0, 500 * time.Millisecond, store.LeaseClaim, "PAY-001"},
		{"ExpiredLeaseReclaimed", 0, 600 * time.Millisecond, store.LeaseClaim, "PAY-001"},
		{"ExpiryBlindNeverReclaims", 0, time.Hour, store.ExpiryBlindClaim, "PAY-002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustOpenLeaseDB(t)
			ca, err := withClaim(a, tt.claim).ClaimNext(ctx, t0.Add(tt.claimedAt), store.OutboxLeaseFor("Worker-A", t0.Add(tt.claimedAt), lease), nil)
			if err != nil || ca.Outcome != store.Claimed || ca.Message.AggregateKey != "PAY-001" {
				t.Fatalf("A's claim = %+v, %v", ca, err)
			}
			cb, err := withClaim(b, tt.claim).ClaimNext(ctx, t0.Add(tt.bAt), store.OutboxLeaseFor("Worker-B", t0.Add(tt.bAt), lease), nil)
			if err != nil {
				t.Fatal(err)
			}
			if cb.Outcome != store.Claimed || cb.Message.AggregateKey != tt.wantKey || cb.Message.LockedBy != "Worker-B" {
				t.Fatalf("B's claim = %+v, want %s", cb, tt.wantKey)
			}
		})
	}
	t.Run("Empty", func(t *testing.T) {
		a, _ := mustOpenLeaseDB(t)
		for i := 0; i < 2; i++ {
			if c, err := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, lease), nil); err != nil || c.Outcome != store.Claimed {
				t.Fatalf("claim %d = %+v, %v", i, c, err)
			}
		}
		c, err := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, lease), nil)
		if err != nil || c.Outcome != store.Empty {
			t.Fatalf("third claim = %+v, %v; want empty", c, err)
		}
	})
}

func TestClaimMessage(t *testing.T) {
	ctx := context.Background()
	a, b := mustOpenLeaseDB(t)
	ca, _ := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, 500*time.Millisecond), nil)

	t.Run("Blocked", func(t *testing.T) {
		c, err := lessonOutbox(b).ClaimMessage(ctx, ca.Message.ID, t0.Add(100*time.Millisecond), store.OutboxLeaseFor("Worker-B", t0.Add(100*time.Millisecond), time.Second))
		if err != nil || c.Outcome != store.Blocked || c.HeldBy != "Worker-A" || c.HeldUntil != "2026-01-15T09:00:00.500Z" {
			t.Fatalf("claim = %+v, %v; want blocked by Worker-A until .500", c, err)
		}
	})
	t.Run("RefusedAfterExpiryByTheExpiryBlindClaim", func(t *testing.T) {
		// The lease ended at .500; a claim that ignores expired leases is
		// refused by its own statement, not blocked by the lease.
		c, err := withClaim(b, store.ExpiryBlindClaim).ClaimMessage(ctx, ca.Message.ID, t0.Add(600*time.Millisecond), store.OutboxLeaseFor("Worker-B", t0.Add(600*time.Millisecond), time.Second))
		if err != nil || c.Outcome != store.Refused || c.HeldBy != "Worker-A" || c.HeldUntil != "2026-01-15T09:00:00.500Z" {
			t.Fatalf("claim = %+v, %v; want refused although Worker-A's lease ended at .500", c, err)
		}
	})
	t.Run("ReclaimedAtExactlyTheLeaseEnd", func(t *testing.T) {
		// The lab's boundary: a lease that ends at t is over at t.
		c, err := lessonOutbox(b).ClaimMessage(ctx, ca.Message.ID, t0.Add(500*time.Millisecond), store.OutboxLeaseFor("Worker-B", t0.Add(500*time.Millisecond), time.Second))
		if err != nil || c.Outcome != store.Claimed {
			t.Fatalf("claim = %+v, %v", c, err)
		}
		f, err := lessonOutbox(b).Finalize(ctx, c.Message.ID, "Worker-B", store.Outcome{Key: "PAY-001", Status: "Paid", TransactionID: "TXN-1"}, t0)
		if err != nil || !f.Finalized {
			t.Fatalf("finalize = %+v, %v", f, err)
		}
	})
	t.Run("Done", func(t *testing.T) {
		c, err := lessonOutbox(a).ClaimMessage(ctx, ca.Message.ID, t0.Add(time.Hour), store.OutboxLeaseFor("Worker-A", t0.Add(time.Hour), time.Second))
		if err != nil || c.Outcome != store.Done {
			t.Fatalf("claim = %+v, %v; want done", c, err)
		}
	})
}

func TestFinalizeOwned(t *testing.T) {
	ctx := context.Background()
	paid := store.Outcome{Key: "PAY-001", Status: "Paid", TransactionID: "TXN-0001"}

	t.Run("OK", func(t *testing.T) {
		a, _ := mustOpenLeaseDB(t)
		c, _ := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), nil)
		f, err := lessonOutbox(a).Finalize(ctx, c.Message.ID, "Worker-A", paid, t0)
		if err != nil || !f.Finalized {
			t.Fatalf("finalize = %+v, %v", f, err)
		}
		if n, _ := a.Count(ctx, store.CountPaymentsByStatus.SQL, sql.Named("status", "Paid")); n != 1 {
			t.Fatalf("paid = %d, want 1", n)
		}
	})
	t.Run("NotOwnerRollsBack", func(t *testing.T) {
		a, b := mustOpenLeaseDB(t)
		c, _ := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), nil)
		f, err := lessonOutbox(b).Finalize(ctx, c.Message.ID, "Worker-B", paid, t0)
		if err != nil || f.Finalized {
			t.Fatalf("finalize by non-owner = %+v, %v; want rejected without error", f, err)
		}
		if n, _ := a.Count(ctx, store.CountPaymentsByStatus.SQL, sql.Named("status", "Paid")); n != 0 {
			t.Fatal("the payment update of a rejected finalization was committed")
		}
		if n, _ := a.Count(ctx, store.CountOutboxByStatus.SQL, sql.Named("status", "Processing")); n != 1 {
			t.Fatal("the message left Processing")
		}
	})
}

func TestUnguardedClaimDoubleOwnership(t *testing.T) {
	ctx := context.Background()
	a, b := mustOpenLeaseDB(t)
	// Worker-B claims inside Worker-A's window between select and update.
	var cb store.Claim
	ca, err := withClaim(a, store.UnguardedClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), func() {
		cb, _ = withClaim(b, store.UnguardedClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-B", t0, time.Second), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ca.Outcome != store.Claimed || cb.Outcome != store.Claimed || ca.Message.ID != cb.Message.ID {
		t.Fatalf("want both to claim the same message: A %+v, B %+v", ca, cb)
	}
	// The same interleaving with the lesson's claim cannot happen: the
	// guarded update refuses the second owner.
	a2, b2 := mustOpenLeaseDB(t)
	c1, _ := withClaim(a2, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), nil)
	c2, _ := lessonOutbox(b2).ClaimMessage(ctx, c1.Message.ID, t0, store.OutboxLeaseFor("Worker-B", t0, time.Second))
	if c2.Outcome != store.Blocked {
		t.Fatalf("lease claim let a second owner in: %+v", c2)
	}
}

func TestAuditQueries(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup string // SQL that breaks the state on purpose
		query string
		args  []any
		want  int
	}{
		{"CleanDuplicates", "", store.DuplicateRows.SQL, nil, 0},
		{"DuplicateOutboxRow", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc)
			VALUES ('PaymentCreated', 'PAY-001', '{}', 'Pending', '2026-01-15T09:00:00.000Z')`, store.DuplicateRows.SQL, nil, 1},
		{"Pending", "", store.CountOutboxByStatus.SQL, []any{sql.Named("status", "Pending")}, 2},
		{"FailedCount", `UPDATE Payments SET PaymentStatus = 'Failed'`, store.CountPaymentsByStatus.SQL, []any{sql.Named("status", "Failed")}, 2},
		{"Orphan", `DELETE FROM OutboxMessages WHERE AggregateKey = 'PAY-002'`, store.OrphanPayments.SQL, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := mustOpenLeaseDB(t)
			if tt.setup != "" {
				if _, err := a.InTx(ctx, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, tt.setup); return err }); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.Count(ctx, tt.query, tt.args...)
			if err != nil || got != tt.want {
				t.Fatalf("count = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestInTxRetriesBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	writer := storetest.Open(t, path, store.DefaultConfig)
	if err := writer.Migrate(ctx, store.PaymentsOutbox); err != nil {
		t.Fatal(err)
	}
	rival := storetest.Open(t, path, store.Config{BusyTimeout: 5 * time.Millisecond})

	// The handshake, with no sleep: the first attempt, holding the write
	// lock, has a rival instance try to write. The rival meets a real
	// SQLITE_BUSY, and the attempt returns it; InTx must roll back, count
	// the retry and run fn again.
	attempts := 0
	stats, err := writer.InTx(ctx, func(tx *sql.Tx) error {
		if attempts++; attempts == 1 {
			_, err := rival.Count(ctx, `INSERT INTO Payments (IdempotencyKey, AmountCents, CreatedAtUtc, UpdatedAtUtc) VALUES ('PAY-8', 1, 'x', 'x') RETURNING 1`)
			if !store.IsBusy(err) {
				return fmt.Errorf("the rival's write returned %v, want SQLITE_BUSY", err)
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO Payments (IdempotencyKey, AmountCents, CreatedAtUtc, UpdatedAtUtc) VALUES ('PAY-9', 1, 'x', 'x')`)
		return err
	})
	if err != nil {
		t.Fatalf("InTx failed under contention: %v", err)
	}
	if stats.BusyRetries != 1 || attempts != 2 {
		t.Fatalf("busy retries %d, attempts %d; want 1 and 2", stats.BusyRetries, attempts)
	}
	if n, err := writer.Count(ctx, "SELECT count(*) FROM Payments"); err != nil || n != 1 {
		t.Fatalf("payments = %d, %v; want only the retried transaction's", n, err)
	}
}

// TestClaimOverreachRollsBack: a claim UPDATE that changes more than one
// row is no claim: the transaction rolls back and says how many rows.
func TestClaimOverreachRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, _ := mustOpenLeaseDB(t)
	every := store.ClaimSQL{SelectNext: store.ClaimSelectNext, Update: store.Stmt{Name: "test: claim every row", SQL: `UPDATE OutboxMessages
SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until
WHERE :id > 0`}}
	c, err := withClaim(a, every).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), nil)
	if err != nil || c.Outcome != store.Overreach || c.Rows != 2 {
		t.Fatalf("claim = %+v, %v; want overreach over 2 rows", c, err)
	}
	n, err := a.Count(ctx, store.CountOutboxByStatus.SQL, sql.Named("status", "Pending"))
	if err != nil || n != 2 {
		t.Fatalf("Pending after the rolled-back claim = %d, %v; want 2", n, err)
	}
}

// TestFinalizeRefusedWithoutError: a finalization whose guard changes no
// row is refused, never an error, whether the row is another worker's or
// gone: an UPDATE (another worker's claim file, say) renumbered the
// message after its claim. Before the fix the gone row's read-back failed
// with sql.ErrNoRows and Finalize returned an error, which grade counts
// as the lab's failure (exit 3) instead of judging the file.
func TestFinalizeRefusedWithoutError(t *testing.T) {
	ctx := context.Background()
	paid := store.Outcome{Key: "PAY-001", Status: "Paid", TransactionID: "TXN-0001"}
	tests := []struct {
		name       string
		after      string // SQL run after Worker-A's claim; "" for none
		worker     string // who finalizes
		gone       bool
		refusedBy  string // the row's LockedBy as the guard found it
		processing int    // messages left Processing
	}{
		{"OtherOwner", "", "Worker-B", false, "Worker-A", 1},
		{"Renumbered", "UPDATE OutboxMessages SET Id = Id + 1000 WHERE Status = 'Processing'", "Worker-A", true, "", 1},
		{"Deleted", "DELETE FROM OutboxMessages WHERE Status = 'Processing'", "Worker-A", true, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustOpenLeaseDB(t)
			c, err := withClaim(a, store.LeaseClaim).ClaimNext(ctx, t0, store.OutboxLeaseFor("Worker-A", t0, time.Second), nil)
			if err != nil || c.Outcome != store.Claimed {
				t.Fatalf("claim = %+v, %v", c, err)
			}
			if tt.after != "" {
				if err := a.Migrate(ctx, store.Migration{Name: "test: " + tt.name, SQL: tt.after}); err != nil {
					t.Fatal(err)
				}
			}
			f, err := lessonOutbox(b).Finalize(ctx, c.Message.ID, tt.worker, paid, t0)
			if err != nil || f.Finalized || f.Gone != tt.gone || f.Refused.LockedBy != tt.refusedBy || tt.gone && f.Refused != (store.Message{}) {
				t.Fatalf("finalize = %+v, %v; want refused without error, gone %v, held by %q", f, err, tt.gone, tt.refusedBy)
			}
			if n, _ := a.Count(ctx, store.CountPaymentsByStatus.SQL, sql.Named("status", "Paid")); n != 0 {
				t.Fatal("the payment update of a refused finalization was committed")
			}
			if n, _ := a.Count(ctx, store.CountOutboxByStatus.SQL, sql.Named("status", "Processing")); n != tt.processing {
				t.Fatalf("%d messages Processing, want %d", n, tt.processing)
			}
		})
	}
}
