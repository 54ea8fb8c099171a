package cast

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestHeartbeatCancelsWork: a renewal that changes 0 rows cancels the
// work's context with its cause, and a cancelled work neither sends nor
// completes.
func TestHeartbeatCancelsWork(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		maxProc   int64
		freeze    bool
		wantCause error
	}{
		{"LeaseLostAfterPause", 10 * TickMinute, true, ErrLeaseLost},
		{"ProcessingDeadline", 45 * TickSecond, false, ErrProcessingDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), "hb.db"), store.DefaultConfig)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx, store.RelayEvents, store.HeartbeatClaims, store.BrokerInbox); err != nil {
				t.Fatal(err)
			}
			if err := store.NewRelay(db, store.HeartbeatLesson.Relay).Insert(ctx, store.NewEvent{ID: "e1", Type: "T", Payload: "{}"}, 0); err != nil {
				t.Fatal(err)
			}
			s := NewHeartbeatStage(&lab.Timeline{}, store.NewBroker(db, store.BrokerLesson))
			defer s.Close()
			p := HeartbeatPolicy{Lease: 30 * TickSecond, Margin: 10 * TickSecond, MaxProcessing: tt.maxProc, OnLeaseLost: CancelWork}
			a, b := s.NewRelay("A", db, store.HeartbeatLesson, p), s.NewRelay("B", db, store.HeartbeatLesson, p)
			j, err := a.Poll(ctx)
			if err != nil || j == nil {
				t.Fatalf("poll = %v, %v", j, err)
			}
			j.Hang("never answers")
			if tt.freeze {
				a.Freeze("pause")
				if err := s.AdvanceTo(ctx, 31*TickSecond); err != nil {
					t.Fatal(err)
				}
				if jb, err := b.Poll(ctx); err != nil || jb == nil {
					t.Fatalf("B's poll = %v, %v", jb, err)
				}
				if err := a.Resume(ctx); err != nil {
					t.Fatal(err)
				}
			} else if err := s.AdvanceTo(ctx, 25*TickSecond); err != nil {
				t.Fatal(err)
			}
			<-j.hung // the hung work returned: its context was cancelled
			if got := context.Cause(j.work); !errors.Is(got, tt.wantCause) {
				t.Fatalf("cause = %v, want %v", got, tt.wantCause)
			}
			if sent, err := j.Send(ctx); sent || err != nil {
				t.Fatalf("Send = %v, %v; want no send", sent, err)
			}
			if done, err := j.Complete(ctx); done || err != nil || len(s.Completions) != 0 {
				t.Fatalf("Complete = %v, %v, %d completions; want none attempted", done, err, len(s.Completions))
			}
		})
	}
}
