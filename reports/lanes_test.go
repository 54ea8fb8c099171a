package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

func TestEventKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		actor, action, detail, want string
	}{
		{"Worker-A", "claim claimed", "claimed message 1 (PAY-001), lease until 2026-01-15T09:00:00.500Z", KindClaim},
		{"Worker-B", "claim blocked", "message 1 (PAY-001) is Processing under Worker-A's live lease", KindBlocked},
		{"Worker-B", "claims, lease until 210", "refused: 0 rows (Worker-A's lease live until 200)", KindBlocked},
		{"Worker-B", "claim refused", "REFUSED although Worker-A's lease on message 1 (PAY-001) ended at 2026-01-15T09:00:00.500Z", KindRefused},
		{"Relay-A", "complete", "e1 WHERE claim_token = 1: published (10 rows)", KindFinalize},
		{"Worker-A", "claim empty", "nothing claimable", KindNote},
		{"Worker-A", "CRASH", "died before processing PAY-001", KindCrash},
		{"clock", "lease expiry", "the clock reaches 09:00:31", KindExpiry},
		{"Relay-A", "complete", "e42 WHERE claim_token = 1: fenced out (0 rows): stale token 1, current 2; lease lost", KindFenced},
		{"Relay-B", "complete", "e42 WHERE claim_token = 2: published (1 row)", KindFinalize},
		{"Worker-A", "finalize rejected", "guard changed 0 rows", KindRejected},
		{"Worker-A", "renews to 200 with token 1", "renewed: 1 row", KindRenew},
		{"Relay-A", "heartbeat e2 refused", "token 1: 0 rows; lease lost", KindFenced},
		{"Relay-A", "send", "e42 (token 1) as message id e42: broker stored offer 1; ack received", KindOffer},
		{"broker", "deliver", "offer 1 (e1) to Consumer-Recovery: delivery 1", KindDeliver},
		{"Naive-Consumer", "effect", "offer 1 delivery 1 of e42: credited 1000 cents", KindEffect},
		{"Inbox-Consumer", "no effect", "duplicate: the inbox insert added 0 rows", KindDedup},
		{"Inbox-Consumer", "ack", "offer 1 delivery 1: acked", KindAck},
		{"checkout", "commit e42", "outbox event committed", KindCommit},
	} {
		if got := EventKind(lab.Event{Actor: tc.actor, Action: tc.action, Detail: tc.detail}); got != tc.want {
			t.Errorf("%s %q %q: kind %q, want %q", tc.actor, tc.action, tc.detail, got, tc.want)
		}
	}
	if got := EventKind(lab.Event{Actor: "x", Action: "anything", Kind: KindCrash}); got != KindCrash {
		t.Errorf("a set Kind must win, got %q", got)
	}
}

// session18 is session 18's race: a lease that runs out after the send.
func session18() *lab.Result {
	ev := func(seq int, at, actor, action, detail string) lab.Event {
		return lab.Event{Seq: seq, At: "2026-01-15T09:00:" + at + ".000Z", Actor: actor, Action: action, Detail: detail}
	}
	return &lab.Result{Timeline: []lab.Event{
		ev(1, "00", "checkout", "commit e42", "outbox event committed"),
		ev(2, "01", "Relay-A", "claim claimed", "e42 with token 1, lease until 2026-01-15T09:00:31.000Z"),
		ev(3, "02", "Relay-A", "send", "e42 (token 1): broker stored offer 1; ack received"),
		ev(4, "31", "clock", "lease expiry", "Relay-A's lease on e42 has expired"),
		ev(5, "31", "Relay-B", "claim claimed", "e42 with token 2, lease until 2026-01-15T09:01:01.000Z"),
		ev(6, "32", "Relay-B", "send", "e42 (token 2): broker stored offer 2; ack received"),
		ev(7, "33", "Relay-A", "complete", "e42 WHERE claim_token = 1: fenced out (0 rows): stale token 1"),
		ev(8, "34", "Relay-B", "complete", "e42 WHERE claim_token = 2: published (1 row)"),
		ev(9, "39", "Worker-Crash", "CRASH", "died"),
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
		{"2", "+ claim e42"}, {"3", "| send e42"}, {"4", "~ expired"}, {"5", "+ claim e42"},
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

func TestLanesFit120ColumnsInASCII(t *testing.T) {
	t.Parallel()
	r := &lab.Result{}
	for i := 0; i < 14; i++ {
		actor := "Consumer-" + strings.Repeat("x", i%3) + string(rune('A'+i))
		r.Timeline = append(r.Timeline, lab.Event{Seq: i + 1, At: "2026-01-15T09:00:00.000Z", Actor: actor, Action: "effect résumé", Detail: "credited"})
	}
	r.Timeline = append(r.Timeline, lab.Event{Seq: 15, At: "2026-01-15T09:00:01.000Z", Actor: "Consumer-A", Action: "effect", Detail: "again"})
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
