package reports

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestLaneMarks: an event's mark and label come from its kind, never from
// its wording; every kind that must catch the eye has a mark of its own.
func TestLaneMarks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind       lab.Kind
		action     string
		mark, text string
		refusal    lab.Refusal
	}{
		{lab.KindClaim, "claim claimed", "", "claim", ""},
		{lab.KindSteal, "claim claimed", "!T", "claim TOOK", ""},
		{lab.KindBlocked, "claim blocked", "#", "claim blocked", ""},
		{lab.KindDone, "claim done", "D", "claim: done", ""},
		{lab.KindRefused, "claim refused", "?R", "claim REFUSED", ""},
		{lab.KindFenced, "heartbeat e3 refused", "!!", "FENCED heartbeat", lab.RefusedByToken},
		{lab.KindFenced, "complete", "!!", "FENCED complete", lab.RefusedByToken},
		// A refusal by any guard but a token names the guard, never FENCED.
		{lab.KindFenced, "finalize rejected", "-!", "finalize REFUSED by LockedBy", lab.RefusedByOwner},
		{lab.KindFenced, "retry finalize", "-!", "retry REFUSED: already done", lab.RefusedByStatus},
		{lab.KindFenced, "ack failed", "-!", "ack REFUSED: lease ended", lab.RefusedByLease},
		{lab.KindFenced, "heartbeat e3 refused", "-!", "heartbeat REFUSED: deadline", lab.RefusedByDeadline},
		{lab.KindFenced, "renews to 160 with token 2", "-!", "renews REFUSED: not later", lab.RefusedByShorter},
		{lab.KindFenced, "ack", "-!", "ack REFUSED: old receipt", lab.RefusedByReceipt},
		{lab.KindFenced, "complete", "-!", "complete REFUSED: row gone", lab.RefusedByGone},
		{lab.KindFenced, "claim overreach", "-!", "claim ROLLED BACK: >1 row", lab.RefusedByRowCount},
		{lab.KindFenced, "complete", "-!", "complete REFUSED", ""},
		// The wording says "refused"; only the refusal says a token did.
		{lab.KindFenced, "ack failed: lease-lost", "-!", "ack REFUSED: lease ended", lab.RefusedByLease},
		{lab.KindAckLost, "ack", "//", "ack LOST", ""},
		{lab.KindAck, "ack", "", "ack", ""},
		{lab.KindUnsent, "marks complete", "!U", "COMPLETE, never sent", ""},
		{lab.KindNoOp, "ack", "=0", "ack: 0 rows", ""},
		{lab.KindNoOp, "re-take: finalize again", "=0", "re-take: 0 rows", ""},
		{lab.KindStale, "late finalize", "!S", "STALE late", ""},
		{lab.KindStall, "stalls", "zz", "stall", ""},
		{lab.KindCrash, "CRASH", "XX", "CRASH", ""},
		{lab.KindError, "ack failed: database-error", "E!", "ERROR ack", ""},
		// The wording says "claim blocked"; the kind says what happened.
		{lab.KindClaim, "claim blocked", "", "claim", ""},
	} {
		e := raceEvent{Event: lab.Event{Actor: "Relay-C", Action: tc.action, Kind: tc.kind, Refusal: tc.refusal}}
		if got := laneMark(e); got != tc.mark {
			t.Errorf("%s %q: mark %q, want %q", tc.kind, tc.action, got, tc.mark)
		}
		if got := laneText(e, false); got != tc.text {
			t.Errorf("%s %q: text %q, want %q", tc.kind, tc.action, got, tc.text)
		}
	}
}

// TestLaneMarkOfALostBrokerAck: a send whose broker ack never reached the
// relay is drawn as a send with its ack lost, from the event's AckLost
// field, not its wording; a send whose ack came back is a plain send.
func TestLaneMarkOfALostBrokerAck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lost       bool
		mark, text string
	}{{true, "//", "send, ack LOST e3"}, {false, "", "send e3"}} {
		e := raceEvent{Event: lab.Event{Actor: "Relay-A", Action: "send", Kind: lab.KindOffer, Subject: "e3", Offer: 1, AckLost: tc.lost}}
		if got := laneMark(e); got != tc.mark {
			t.Errorf("lost %v: mark %q, want %q", tc.lost, got, tc.mark)
		}
		if got := laneText(e, false); got != tc.text {
			t.Errorf("lost %v: text %q, want %q", tc.lost, got, tc.text)
		}
	}
}

// session18 is session 18's race: a lease that runs out after the send.
func session18() *lab.Result {
	ev := func(seq int, at, actor, action string, kind lab.Kind, subject, until string) lab.Event {
		e := lab.Event{Seq: seq, At: "2026-01-15T09:00:" + at + ".000Z", Actor: actor, Action: action, Detail: action + " (detail)",
			Kind: kind, Subject: subject}
		if until != "" {
			e.Until = "2026-01-15T09:" + until + ".000Z"
		}
		return e
	}
	rows := func(e lab.Event, n int64) lab.Event { e.Rows = lab.RowsOf(n); return e }
	offer := func(e lab.Event, n int64) lab.Event { e.Offer = n; return e }
	fenced := func(e lab.Event) lab.Event { e.Refusal = lab.RefusedByToken; return e }
	return &lab.Result{Timeline: []lab.Event{
		ev(1, "00", "checkout", "commit e42", lab.KindCommit, "e42", ""),
		rows(ev(2, "01", "Relay-A", "claim claimed", lab.KindClaim, "e42", "00:31"), 1),
		offer(ev(3, "02", "Relay-A", "send", lab.KindOffer, "e42", ""), 1),
		ev(4, "31", "clock", "lease expiry", lab.KindExpiry, "e42", ""),
		rows(ev(5, "31", "Relay-B", "claim claimed", lab.KindClaim, "e42", "01:01"), 1),
		offer(ev(6, "32", "Relay-B", "send", lab.KindOffer, "e42", ""), 2),
		fenced(rows(ev(7, "33", "Relay-A", "complete", lab.KindFenced, "e42", ""), 0)),
		rows(ev(8, "34", "Relay-B", "complete", lab.KindFinalize, "e42", ""), 1),
		ev(9, "39", "Worker-Crash", "CRASH", lab.KindCrash, "", ""),
	}}
}

// unguarded is a steal: Worker-B's claim takes PAY-002 while Worker-A's
// lease on it is live, and Worker-A's finalize is then stale.
func unguarded() *lab.Result {
	ev := func(seq int, at, actor, action string, kind lab.Kind, until string) lab.Event {
		e := lab.Event{Seq: seq, At: "2026-01-15T09:00:" + at + "Z", Actor: actor, Action: action, Kind: kind, Subject: "PAY-002"}
		if until != "" {
			e.Until = "2026-01-15T09:00:" + until + "Z"
		}
		return e
	}
	return &lab.Result{Timeline: []lab.Event{
		ev(1, "00.000", "Worker-A", "claim claimed", lab.KindClaim, "00.500"),
		ev(2, "00.100", "Worker-B", "claim claimed", lab.KindSteal, "00.600"),
		ev(3, "00.200", "Worker-A", "finalize", lab.KindStale, ""),
		ev(4, "00.300", "Worker-B", "finalize", lab.KindFinalize, ""),
	}}
}

func TestLanesDrawLeasesAndMarks(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Lanes(&b, session18()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	row := func(seq string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == seq {
				return l
			}
		}
		t.Fatalf("no row %s in:\n%s", seq, out)
		return ""
	}
	for _, want := range []struct{ seq, text string }{
		{"2", "+ claim e42"}, {"3", "| send e42"}, {"4", "~ ran out"}, {"5", "+ claim e42"},
		{"7", "!! FENCED"}, {"8", "= complete e42"}, {"9", "XX CRASH"},
	} {
		if !strings.Contains(row(want.seq), want.text) {
			t.Errorf("row %s = %q, want %q in it", want.seq, row(want.seq), want.text)
		}
	}
	// Relay-B's lease bar runs through Relay-A's fenced write.
	if r7 := row("7"); strings.Count(r7, "|") != 1 {
		t.Errorf("row 7 = %q, want Relay-B's bar beside the fenced write", r7)
	}
	if !strings.Contains(lines[1], "Relay-A") || !strings.Contains(lines[1], "Relay-B") || strings.Contains(lines[1], "broker") {
		t.Errorf("header %q: one column per actor of the timeline", lines[1])
	}
}

// TestLanesDrawTheSteal: a lease another worker's claim took while it was
// live ends "> taken" in its owner's column, on the thief's row, and the
// stale write after it is marked; nothing says the lease ran out.
func TestLanesDrawTheSteal(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Lanes(&b, unguarded()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"+ claim PAY-002", "> taken", "!T claim TOOK", "!S STALE finalize", "= finalize PAY-002"} {
		if !strings.Contains(out, want) {
			t.Errorf("lanes lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ran out") {
		t.Errorf("the stolen lease did not run out:\n%s", out)
	}
	rc := newRace(unguarded())
	if len(rc.Leases) != 2 || rc.Leases[0].Ended != endTaken || rc.Leases[0].By != "Worker-B" || rc.Leases[1].Ended != endFinalized {
		t.Errorf("leases %+v: want Worker-A's taken over by Worker-B, Worker-B's finalized", rc.Leases)
	}
}

// TestLanesDrawALeaseToTheRunsEnd: a lease still live when the timeline
// ends is drawn through the last row, where its owner still holds it.
func TestLanesDrawALeaseToTheRunsEnd(t *testing.T) {
	t.Parallel()
	ev := func(seq int, at, actor, action string, kind lab.Kind, until string) lab.Event {
		e := lab.Event{Seq: seq, At: "2026-01-15T09:00:" + at + "Z", Actor: actor, Action: action, Kind: kind, Subject: "PAY-001"}
		if until != "" {
			e.Until = "2026-01-15T09:00:" + until + "Z"
		}
		return e
	}
	r := &lab.Result{Timeline: []lab.Event{
		ev(1, "00.000", "Worker-A", "claim claimed", lab.KindClaim, "00.500"),
		ev(2, "00.100", "Worker-B", "claim blocked", lab.KindBlocked, ""),
		ev(3, "00.200", "Worker-A", "renew", lab.KindRenew, "00.700"),
	}}
	var b bytes.Buffer
	if err := Lanes(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "3" && !strings.Contains(l, "| renew") {
			t.Errorf("row 3 = %q: the renewal of a lease that outlives the run is drawn in its bar", l)
		}
	}
	if rc := newRace(r); len(rc.Leases) != 1 || rc.Leases[0].Ended != endRunEnded {
		t.Errorf("leases %+v: want Worker-A's, ended by the run's end", rc.Leases)
	}
}

func TestLanesFit120ColumnsInASCII(t *testing.T) {
	t.Parallel()
	r := &lab.Result{}
	for i := 0; i < 14; i++ {
		actor := "Consumer-" + strings.Repeat("x", i%3) + string(rune('A'+i))
		r.Timeline = append(r.Timeline, lab.Event{Seq: i + 1, At: "2026-01-15T09:00:00.000Z", Actor: actor, Action: "effect résumé", Detail: "credited", Kind: lab.KindEffect})
	}
	r.Timeline = append(r.Timeline, lab.Event{Seq: 15, At: "2026-01-15T09:00:01.000Z", Actor: "Consumer-A", Action: "effect", Detail: "again", Kind: lab.KindEffect})
	var b bytes.Buffer
	if err := Lanes(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if len(l) > laneWidth {
			t.Errorf("%d columns: %q", len(l), l)
		}
		for _, c := range []byte(l) {
			if c > 126 {
				t.Fatalf("not ASCII: %q", l)
			}
		}
	}
	if !strings.Contains(b.String(), "others") || !strings.Contains(b.String(), "Consumer-") {
		t.Errorf("14 actors must share an others column naming its actors:\n%s", b.String())
	}
}

// renewAfterExpiry is session 17's renew-after-expiry run: Worker-A's
// lease ends at t=200, its renewal at t=200 still changes the row (the
// mistake), so Worker-B's claims are blocked and Worker-A renews again.
// Action words are what a lesson might say; the pictures must not read
// them.
func renewAfterExpiry() *lab.Result {
	ev := func(seq int, at int64, actor, action string, kind lab.Kind, rows int64, until int64) lab.Event {
		e := lab.Event{Seq: seq, At: fmt.Sprintf("t=%d", at), Actor: actor, Action: action, Kind: kind, Subject: "EVENT-81"}
		if rows >= 0 {
			e.Rows = lab.RowsOf(rows)
		}
		if until > 0 {
			e.Until = fmt.Sprintf("t=%d", until)
		}
		return e
	}
	return &lab.Result{Timeline: []lab.Event{
		ev(1, 0, "producer", "insert event", lab.KindCommit, -1, 0),
		ev(2, 100, "Worker-A", "claims", lab.KindClaim, 1, 150),
		ev(3, 130, "Worker-A", "renews", lab.KindRenew, 1, 200),
		ev(4, 160, "Worker-B", "claims", lab.KindBlocked, 0, 0),
		ev(5, 200, "Worker-A", "renews", lab.KindStale, 1, 250),
		ev(6, 200, "Worker-B", "claims", lab.KindBlocked, 0, 0),
		ev(7, 210, "Worker-A", "renews", lab.KindRenew, 1, 270),
		ev(8, 220, "Worker-B", "renews", lab.KindFenced, 0, 0),
	}}
}

// TestLanesReviveAnEndedLease: a renewal that changed the row (1 row)
// after its lease had ended reopens the bar from its own row, labelled as
// a revival, to the new lease end: the database holds a live lease again,
// which is why Worker-B's claim at t=200 is blocked, and Worker-A's later
// renewal is drawn in that bar.
func TestLanesReviveAnEndedLease(t *testing.T) {
	t.Parallel()
	r := renewAfterExpiry()
	rc := newRace(r)
	if len(rc.Leases) != 2 || rc.Leases[0].Ended != endRanOut || rc.Leases[0].To != 200_000 {
		t.Fatalf("leases %+v: want Worker-A's claim's lease run out at t=200, then a revived one", rc.Leases)
	}
	if l := rc.Leases[1]; !l.Revived || l.Owner != "Worker-A" || rc.Events[l.Start].Seq != 5 || l.To != 220_000 ||
		l.Ended != endRunEnded || len(l.Renewals) != 1 || rc.Events[l.Renewals[0]].Seq != 7 {
		t.Errorf("lease %+v: want Worker-A's, revived at #5, renewed at #7, to the run's end", l)
	}
	var b bytes.Buffer
	if err := Lanes(&b, r); err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = l
		}
	}
	for seq, want := range map[string]string{
		"5": "!S REVIVES ended lease EVENT-81", "6": "|", "7": "| renew EVENT-81", "8": "|",
	} {
		if !strings.Contains(rows[seq], want) {
			t.Errorf("row %s = %q, want %q in it:\n%s", seq, rows[seq], want, b.String())
		}
	}
	if r6 := rows["6"]; strings.Index(r6, "|") > strings.Index(r6, "# claim blocked") {
		t.Errorf("row 6 = %q: Worker-A's revived bar stands left of Worker-B's blocked claim", r6)
	}
}

// TestLanesReviveNothingElse: after the lease's end, a renewal that
// changed no row, a stale write that left no lease end (a late finalize),
// and renewals of a lease another worker's claim took (held live) revive
// nothing.
func TestLanesReviveNothingElse(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*lab.Result){
		"fenced renewal": func(r *lab.Result) {
			r.Timeline[4].Kind, r.Timeline[4].Rows, r.Timeline[4].Until = lab.KindFenced, lab.RowsOf(0), ""
		},
		"0 rows":       func(r *lab.Result) { r.Timeline[4].Rows = lab.RowsOf(0) },
		"no lease end": func(r *lab.Result) { r.Timeline[4].Until = "" },
		"taken first": func(r *lab.Result) {
			r.Timeline[3].Kind, r.Timeline[3].At, r.Timeline[3].Until, r.Timeline[3].Rows = lab.KindClaim, "t=200", "t=260", lab.RowsOf(1)
		},
	} {
		r := renewAfterExpiry()
		edit(r)
		if name != "taken first" {
			r.Timeline = r.Timeline[:6] // #5 is the only renewal after the end
		}
		for _, l := range newRace(r).Leases {
			if l.Revived {
				t.Errorf("%s: lease %+v revived", name, l)
			}
		}
	}
}

// refusedBy is session 18's race with Relay-A's complete refused by
// guard instead of by its token.
func refusedBy(guard lab.Refusal) *lab.Result {
	r := session18()
	r.Timeline[6].Refusal = guard
	return r
}

// lostAckAndUnsent is a consumer's ack lost on the way and a relay's
// completion of an event it never sent.
func lostAckAndUnsent() *lab.Result {
	return &lab.Result{Timeline: []lab.Event{
		{Seq: 1, At: "t=1", Actor: "Relay-D", Action: "claim claimed", Kind: lab.KindClaim, Subject: "e5", Until: "t=30", Rows: lab.RowsOf(1)},
		{Seq: 2, At: "t=2", Actor: "Relay-D", Action: "marks complete", Kind: lab.KindUnsent, Subject: "e5", Rows: lab.RowsOf(1)},
		{Seq: 3, At: "t=3", Actor: "Consumer-1", Action: "ack", Kind: lab.KindAckLost, Subject: "e4", Offer: 1},
	}}
}

// TestLanesSayWhetherAnUnsentCompletionWasSentLater: a completion of a
// message its relay had not sent says "never sent" only where the relay
// sends it at no later row, and "before send" where it does.
func TestLanesSayWhetherAnUnsentCompletionWasSentLater(t *testing.T) {
	t.Parallel()
	for _, sentLater := range []bool{false, true} {
		r := lostAckAndUnsent()
		want, not := "COMPLETE, never sent", "COMPLETE before send"
		if sentLater {
			r.Timeline = append(r.Timeline, lab.Event{Seq: 4, At: "t=4", Actor: "Relay-D", Action: "send", Kind: lab.KindOffer, Subject: "e5", Offer: 2})
			want, not = not, want
		}
		var b bytes.Buffer
		if err := Lanes(&b, r); err != nil {
			t.Fatal(err)
		}
		legend := LaneLegend(r)
		if !strings.Contains(b.String(), "!U "+want) || strings.Contains(b.String(), not) || !strings.Contains(legend, want+":") ||
			strings.Contains(legend, not) {
			t.Errorf("sent later %v: want %q, not %q:\n%s\n%s", sentLater, want, not, legend, b.String())
		}
	}
}

// TestWrapCell: a lane cell too wide for its column wraps at spaces,
// never mid-word, under the first word after its mark, and a lease held on
// into the next row (bar) goes on down its lines, whatever the mark; only
// a word too wide for a line is cut.
func TestWrapCell(t *testing.T) {
	tests := []struct {
		cell  string
		width int
		bar   bool
		want  []string
	}{
		{"= complete e42", 14, false, []string{"= complete e42"}},
		{"= complete e42", 13, false, []string{"= complete", "  e42"}},
		{"!! FENCED heartbeat e3", 12, false, []string{"!! FENCED", "   heartbeat", "   e3"}},
		{"!! FENCED heartbeat e3", 12, true, []string{"!! FENCED", "|  heartbeat", "|  e3"}},
		{"| work cancelled e3", 12, true, []string{"| work", "| cancelled", "| e3"}},
		{"| work ends e3", 8, false, []string{"| work", "  ends", "  e3"}},
		{"operator: replay e20", 12, false, []string{"operator:", "replay e20"}},
		{"!! FENCED heartbeat", 10, true, []string{"!! FENCED", "heartbeat"}},
		{"acknowledgement", 6, false, []string{"acknowledgement"}}, // pad cuts it: "ackno."
	}
	for _, tt := range tests {
		if got := wrapCell(tt.cell, tt.width, tt.bar); !slices.Equal(got, tt.want) {
			t.Errorf("wrapCell(%q, %d, %v) = %q, want %q", tt.cell, tt.width, tt.bar, got, tt.want)
		}
	}
}

// TestLaneLegendListsTheMarksShown: the legend explains the marks the
// lanes draw and no other; a run with a crash and a fenced write explains
// both, a run with neither explains neither.
func TestLaneLegendListsTheMarksShown(t *testing.T) {
	t.Parallel()
	quiet := session18()
	var kept []lab.Event
	for _, e := range quiet.Timeline {
		if e.Kind != lab.KindCrash && e.Kind != lab.KindFenced {
			kept = append(kept, e)
		}
	}
	quiet.Timeline = kept
	tests := []struct {
		name       string
		r          *lab.Result
		want, omit []string
	}{
		{"CrashAndFence", session18(), []string{"'+' where a claim took", "XX a crash", "!! FENCED a write a newer fencing token"},
			[]string{"REVIVES", "zz a stall", "E! a statement", "-! a write", "REFUSED", "// an ack", "!U"}},
		{"Neither", quiet, []string{"'+' where a claim took"}, []string{"XX a crash", "!! FENCED", "REVIVES"}},
		{"RefusedByLease", refusedBy(lab.RefusedByLease), []string{"-! a write another guard", "REFUSED: lease ended: lease_until"},
			[]string{"!! FENCED", "REFUSED by LockedBy", "REFUSED: deadline"}},
		{"LostAckAndUnsent", lostAckAndUnsent(), []string{"// an ack lost on the way", "!U a completion"},
			[]string{"!! FENCED", "-! a write"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			legend := LaneLegend(tc.r)
			for _, w := range tc.want {
				if !strings.Contains(legend, w) {
					t.Errorf("legend lacks %q:\n%s", w, legend)
				}
			}
			for _, o := range tc.omit {
				if strings.Contains(legend, o) {
					t.Errorf("legend explains %q, a mark its lanes do not show:\n%s", o, legend)
				}
			}
		})
	}
}

// TestLanesDrawCausesFirst: where events share an instant, a consumer's
// effect and ack are drawn below the delivery they came from, and a
// delivery below its offer, whatever order they were recorded in; an
// instant's events with no cause among them keep their recorded order,
// and an effect at a later instant stays where it is.
func TestLanesDrawCausesFirst(t *testing.T) {
	t.Parallel()
	at := func(s int) string { return fmt.Sprintf("2026-01-15T09:00:%02d.000Z", s) }
	r := &lab.Result{Timeline: []lab.Event{
		{Seq: 1, At: at(1), Actor: "Consumer-1", Action: "effect", Kind: lab.KindEffect, Subject: "e1", Offer: 1},
		{Seq: 2, At: at(1), Actor: "Consumer-1", Action: "ack", Kind: lab.KindAck, Subject: "e1", Offer: 1, Rows: lab.RowsOf(1)},
		{Seq: 3, At: at(1), Actor: "broker", Action: "deliver", Kind: lab.KindDeliver, Subject: "e1", Offer: 1, To: "Consumer-1"},
		{Seq: 4, At: at(1), Actor: "Relay-A", Action: "send", Kind: lab.KindOffer, Subject: "e1", Offer: 1},
		{Seq: 5, At: at(1), Actor: "Consumer-2", Action: "effect", Kind: lab.KindEffect, Subject: "e2", Offer: 2},
		{Seq: 6, At: at(2), Actor: "Consumer-1", Action: "no effect", Kind: lab.KindDedup, Subject: "e1", Offer: 1},
		{Seq: 7, At: at(2), Actor: "broker", Action: "deliver", Kind: lab.KindDeliver, Subject: "e1", Offer: 1, To: "Consumer-2"},
	}}
	var order []int
	for _, e := range newRace(r).Events {
		order = append(order, e.Seq)
	}
	// #5 (another offer) keeps its place after its instant's causal chain;
	// #7, a delivery to another consumer, causes nothing of #6's.
	if want := []int{4, 3, 1, 2, 5, 6, 7}; !slices.Equal(order, want) {
		t.Errorf("rows in order %v, want %v", order, want)
	}
	var b bytes.Buffer
	if err := Lanes(&b, r); err != nil {
		t.Fatal(err)
	}
	if send, effect := strings.Index(b.String(), "send e1"), strings.Index(b.String(), "effect e1"); send < 0 || effect < send {
		t.Errorf("the lanes draw the effect above its send:\n%s", b.String())
	}
}
