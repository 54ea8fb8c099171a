package natsbroker

import (
	"context"
	"testing"
	"time"
)

// TestOfferDedupWindow runs the lab broker's dedup timetables
// (store.TestOfferDedupWindow) on JetStream: a resend inside the window
// comes back from JetStream as a duplicate (PubAck.Duplicate, the
// original's stream sequence) and is never delivered; after the window,
// and after a three-day jump, it is accepted; with no window (no
// Nats-Msg-Id) every send is. The lab's boundary case (a resend exactly
// at the window) and its four-day window (over 30 minutes of real time at
// any usable scale) are left out. The window is one minute here, not the
// lesson's two, to keep the test short: 300 ms real, and a compressed
// three-day step 650 ms; resends keep 20 s (100 ms real) from it.
func TestOfferDedupWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		window      time.Duration
		sends       []time.Duration // scenario instants of the sends of e42
		wantDropped []bool
	}{
		{name: "NoWindowKeepsDuplicates", window: 0, sends: []time.Duration{1 * second, 31 * second}, wantDropped: []bool{false, false}},
		{name: "ResendWithinWindowDropped", window: minute, sends: []time.Duration{1 * second, 31 * second}, wantDropped: []bool{false, true}},
		{name: "ResendAfterWindowPasses", window: minute, sends: []time.Duration{1 * second, 81 * second}, wantDropped: []bool{false, false}},
		{name: "ReplayAfterThreeDaysPasses", window: minute, sends: []time.Duration{1 * second, 31 * second, 3 * day}, wantDropped: []bool{false, true, false}},
		// A dropped send is no anchor: the window counts from the last accepted offer.
		{name: "WindowCountsFromAcceptedOffers", window: minute, sends: []time.Duration{0, 40 * second, 80 * second}, wantDropped: []bool{false, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, Config{Window: tt.window})
			dropped := int64(0)
			for i, when := range tt.sends {
				id, gotDropped := mustOffer(t, b, "e42", when, tt.window)
				if gotDropped != tt.wantDropped[i] || id != int64(i+1) {
					t.Fatalf("send %d at %s: offer %d dropped %v, want offer %d dropped %v", i+1, when, id, gotDropped, i+1, tt.wantDropped[i])
				}
				if gotDropped {
					dropped++
				}
			}
			if n, _ := b.CountOffers(context.Background(), "e42", true); n != dropped {
				t.Fatalf("dropped offers recorded = %d, want %d", n, dropped)
			}
			// JetStream's own answers: a duplicate's PubAck names the
			// sequence of the message it duplicates; an accepted send has
			// a sequence of its own.
			seqs := map[uint64]bool{}
			for _, a := range b.Answers().Offers {
				if a.Duplicate != seqs[a.StreamSeq] {
					t.Fatalf("offer %d: PubAck sequence %d duplicate %v, accepted sequences %v", a.OfferID, a.StreamSeq, a.Duplicate, seqs)
				}
				seqs[a.StreamSeq] = true
			}
			// A dropped offer is never delivered.
			last := tt.sends[len(tt.sends)-1]
			if got := deliverAll(t, b, "inbox-consumer", last+second); int64(len(got)) != int64(len(tt.sends))-dropped {
				t.Fatalf("delivered offers %v, want %d", got, int64(len(tt.sends))-dropped)
			}
		})
	}
}

// TestWindowChangeUpdatesTheStream: an offer with another window than the
// stream's makes the stream's duplicate window that window's real
// duration (JetStream's own config, read back), and the change is noted.
func TestWindowChangeUpdatesTheStream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := startBroker(t, Config{Window: minute})
	tests := []struct {
		window time.Duration
		want   time.Duration // the stream's duplicate window
	}{
		{window: minute, want: 300 * time.Millisecond},
		{window: 2 * minute, want: 600 * time.Millisecond},
		{window: 10 * time.Second, want: minDuplicateWindow}, // 50 ms real is under JetStream's minimum
	}
	for i, tt := range tests {
		mustOffer(t, b, "e"+string(rune('1'+i)), time.Duration(i)*second, tt.window)
		s, err := b.js.Stream(ctx, b.StreamName())
		if err != nil {
			t.Fatal(err)
		}
		if got := s.CachedInfo().Config.Duplicates; got != tt.want {
			t.Fatalf("window %s: the stream's duplicate window is %s, want %s", tt.window, got, tt.want)
		}
		if got := b.Timings().WindowReal; got != tt.want {
			t.Fatalf("window %s: Timings().WindowReal %s, want %s", tt.window, got, tt.want)
		}
	}
	if notes := b.Answers().Notes; len(notes) != 2 {
		t.Fatalf("notes %q, want the two changes", notes)
	}
}
