package session23clocks

import (
	"context"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/store"
)

// TestScriptPlaysInTimeOrder: steps run by time, ties in the order they
// were scheduled, a step's own steps included, the clock moved first.
func TestScriptPlaysInTimeOrder(t *testing.T) {
	var got []string
	var clock []int64
	sc := &Script{}
	note := func(s string) func() error { return func() error { got = append(got, s); return nil } }
	sc.At(100, note("b"))
	sc.At(0, func() error {
		got = append(got, "a")
		sc.At(50, note("a2"))
		sc.At(100, note("c"))
		return nil
	})
	err := sc.Play(context.Background(), func(_ context.Context, t int64) error { clock = append(clock, t); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "a2", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("steps ran %v, want %v", got, want)
	}
	if want := []int64{0, 50, 100, 100}; !slices.Equal(clock, want) {
		t.Errorf("clock moved to %v, want %v", clock, want)
	}
}

func TestRaceTally(t *testing.T) {
	var r RaceTally
	r.Add(RenewalLeads, true, false, true)
	r.Add(ClaimLeads, true, true, true)
	r.Add(ClaimLeads, false, true, false)
	r.Add(RenewalLeads, true, false, false)
	want := RaceOutcomes{RenewalOnly: 1, ClaimOnly: 1, Both: 1, Neither: 1}
	if got := r.All(); got != want || r.Met != 3 {
		t.Fatalf("All() = %+v, met %d; want %+v, met 3", got, r.Met, want)
	}
}

func TestZeroRowAckReason(t *testing.T) {
	tests := []struct {
		name   string
		ev     store.Event
		found  bool
		reason string
	}{
		{"Missing", store.Event{}, false, AckDatabaseError},
		{"NewerToken", store.Event{Token: 2, LockedBy: "B", LeaseUntil: 900}, true, AckLeaseLost},
		{"Delivered", store.Event{Token: 1, Delivered: true, LeaseUntil: 900}, true, AckAlreadyDelivered},
		{"RanOut", store.Event{Token: 1, LeaseUntil: 500}, true, AckLeaseLost},
		{"Unexplained", store.Event{Token: 1, LeaseUntil: 900}, true, AckDatabaseError},
	}
	for _, tt := range tests {
		if got, _ := zeroRowAckReason(tt.ev, tt.found, 1, 500); got != tt.reason {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.reason)
		}
	}
}

// TestLiveLeaseClaims: a claim counts when an earlier claim's stored lease
// had not ended at it and no ack completed the event in between.
func TestLiveLeaseClaims(t *testing.T) {
	claim := func(at, until int64) ClockClaim {
		return ClockClaim{Event: "e1", Outcome: store.Claimed, At: at, LeaseUntil: until}
	}
	s := &ClockStage{Claims: []ClockClaim{claim(0, 200), claim(100, 900), claim(900, 1400)}}
	if got := s.LiveLeaseClaims(); got != 1 {
		t.Errorf("live lease claims = %d, want 1 (the claim at 100)", got)
	}
	s.Acks = []ClockAck{{Event: "e1", Rows: 1, At: 50}}
	if got := s.LiveLeaseClaims(); got != 0 {
		t.Errorf("after an ack at 50: live lease claims = %d, want 0", got)
	}
}

// TestRetriedAfterOutage counts the acks that succeeded after an error of
// the same worker, event and token: one success after two outages is one.
func TestRetriedAfterOutage(t *testing.T) {
	ack := func(seq int, worker string, token int64, rows int64, err string) ClockAck {
		return ClockAck{Seq: seq, Part: 2, Worker: worker, Event: "e2", Token: token, Rows: rows, Err: err}
	}
	tests := []struct {
		name string
		acks []ClockAck
		want int
	}{
		{"one outage, then success", []ClockAck{ack(1, "N", 1, 0, "busy"), ack(2, "N", 1, 1, "")}, 1},
		{"two outages, then success", []ClockAck{ack(1, "N", 1, 0, "busy"), ack(2, "N", 1, 0, "busy"), ack(3, "N", 1, 1, "")}, 1},
		{"an outage, never acked", []ClockAck{ack(1, "N", 1, 0, "busy")}, 0},
		{"success, no outage", []ClockAck{ack(1, "N", 1, 1, "")}, 0},
		{"another token succeeded", []ClockAck{ack(1, "N", 1, 0, "busy"), ack(2, "F", 2, 1, "")}, 0},
	}
	for _, tt := range tests {
		s := &ClockStage{Acks: tt.acks}
		if got := s.RetriedAfterOutage(2); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
