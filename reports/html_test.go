package reports

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

func TestHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	r := session18()
	r.Scenario, r.Title, r.Verdict = "session-18-lease-expiry-after-send", "Session 18", "SAFE <design>"
	r.Checks = []lab.Check{{Name: "broker_offers", Expected: "2", Observed: "2", Passed: true}}
	r.Statements = []lab.Statement{{Name: "relay: complete under the current token", SQL: "UPDATE outbox_events SET delivered = 1 WHERE claim_token = :token", Runs: 2, Rows: 1}}
	var b bytes.Buffer
	if err := HTML(&b, r, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	external := regexp.MustCompile(`(?i)(src=|href="?https?:|url\(\s*["']?https?:|@import)`)
	if m := external.FindString(page); m != "" {
		t.Errorf("the page must load nothing from the network, found %q", m)
	}
	for _, want := range []string{
		`class="lane" data-actor="Relay-A"`, `class="lane" data-actor="broker"`, // the broker lane the offers need
		`class="lease expired" data-owner="Relay-A"`, `class="lease" data-owner="Relay-B"`,
		`class="ev k-fenced"`, `class="arrow offer"`, `class="crash-marker"`,
		"UPDATE outbox_events SET delivered = 1", // the fenced write's SQL, from the ledger
		"SAFE &lt;design&gt;",                    // escaped
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func TestWriteHTMLBesideReportAndIndex(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	report := filepath.Join(out, "Session-18", "Session-18-X-RunReport-20260115T090000Z.txt")
	if got := HTMLPath(report); got != strings.TrimSuffix(report, ".txt")+".html" {
		t.Fatalf("HTMLPath = %s", got)
	}
	page, err := WriteHTML(report, session18(), RunInfo{})
	if err != nil || page != HTMLPath(report) {
		t.Fatalf("WriteHTML = %s, %v", page, err)
	}
	index, err := WriteIndex(out, []IndexEntry{{Scenario: "session-18", Passed: true, Page: "Session-18/Session-18-X-RunReport-20260115T090000Z.html"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(index)
	if !strings.Contains(string(b), `href="Session-18/Session-18-X-RunReport-20260115T090000Z.html"`) || !strings.Contains(string(b), "PASS") {
		t.Errorf("index.html lacks the link and verdict:\n%s", b)
	}
}

// TestByMessageKeepsPartsApart: the per-message view counts a message's
// work within one part of the run (one clock segment): the same event
// applied once in each of two parts is not red, twice in one part is, and
// the part is shown only when the run has more than one.
func TestByMessageKeepsPartsApart(t *testing.T) {
	effect := func(seq int, at, actor string) lab.Event {
		return lab.Event{Seq: seq, At: at, Actor: actor, Action: "apply", Kind: lab.KindEffect, Subject: "e20"}
	}
	tests := []struct {
		name     string
		timeline []lab.Event
		want     []messageRow
	}{
		{"OncePerPart", []lab.Event{
			effect(1, "part 1 short 2026-01-15T09:00:40.000Z", "Consumer-1"),
			effect(2, "part 1 long 2026-01-15T09:00:40.000Z", "Consumer-1"),
		}, []messageRow{
			{Part: "part 1 short", Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-1 ×1"},
			{Part: "part 1 long", Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-1 ×1"},
		}},
		{"TwiceInOnePart", []lab.Event{
			effect(1, "part 1 short 2026-01-15T09:00:40.000Z", "Consumer-1"),
			effect(2, "part 1 short 2026-01-15T09:01:10.000Z", "Consumer-1"),
			effect(3, "part 2 2026-01-15T09:00:40.000Z", "Consumer-1"),
		}, []messageRow{
			{Part: "part 1 short", Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-1 ×2", EffectTwice: true},
			{Part: "part 2", Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-1 ×1"},
		}},
		{"OneSegment", []lab.Event{
			effect(1, "2026-01-15T09:00:40.000Z", "Consumer-1"),
			effect(2, "2026-01-15T09:01:10.000Z", "Consumer-1"),
		}, []messageRow{
			{Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-1 ×2", EffectTwice: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &lab.Result{Timeline: tt.timeline}
			if got := byMessage(newRace(r)); !slices.Equal(got, tt.want) {
				t.Errorf("byMessage:\n got %+v\nwant %+v", got, tt.want)
			}
			var b bytes.Buffer
			if err := HTML(&b, r, RunInfo{}); err != nil {
				t.Fatal(err)
			}
			if got, want := strings.Contains(b.String(), "<th>Part</th>"), tt.want[0].Part != ""; got != want {
				t.Errorf("the page shows a Part column: %v, want %v", got, want)
			}
		})
	}
}

// TestByMessageCountsEffectsPerService: effects are counted per consumer
// service, read off the event's Service: two instances of one service
// crediting one event (session 20, part 1 short) is a double effect, red
// whichever instance made each; two services each applying it once is
// not; an effect with no service counts for its actor.
func TestByMessageCountsEffectsPerService(t *testing.T) {
	t.Parallel()
	effect := func(seq int, actor, service string) lab.Event {
		return lab.Event{Seq: seq, At: fmt.Sprintf("2026-01-15T09:00:%02d.000Z", seq), Actor: actor, Service: service,
			Action: "apply", Kind: lab.KindEffect, Subject: "e20"}
	}
	tests := []struct {
		name     string
		timeline []lab.Event
		want     messageRow
	}{
		{"TwoInstancesOneService", []lab.Event{effect(1, "Consumer-2", "credit-service"), effect(2, "Consumer-1", "credit-service")},
			messageRow{Subject: "e20", Work: "-", Sends: "-", Effects: "credit-service ×2 (Consumer-2 ×1, Consumer-1 ×1)", EffectTwice: true}},
		{"TwoServices", []lab.Event{effect(1, "Inbox-Consumer", "inbox-credit"), effect(2, "Naive-Consumer", "naive-credit")},
			messageRow{Subject: "e20", Work: "-", Sends: "-", Effects: "inbox-credit ×1 (Inbox-Consumer ×1), naive-credit ×1 (Naive-Consumer ×1)"}},
		{"NoService", []lab.Event{effect(1, "Consumer-2", ""), effect(2, "Consumer-1", "")},
			messageRow{Subject: "e20", Work: "-", Sends: "-", Effects: "Consumer-2 ×1, Consumer-1 ×1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &lab.Result{Timeline: tt.timeline}
			if got := byMessage(newRace(r)); len(got) != 1 || got[0] != tt.want {
				t.Errorf("byMessage:\n got %+v\nwant %+v", got, tt.want)
			}
			var b bytes.Buffer
			if err := HTML(&b, r, RunInfo{}); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), `class="effects fail"`); got != tt.want.EffectTwice {
				t.Errorf("the page draws the effects red: %v, want %v", got, tt.want.EffectTwice)
			}
		})
	}
}

// TestHTMLDrawsARevivedLease: the page draws the lease a renewal revived
// after its end as a bar of its own from that renewal, edged red and
// explained in the legend; a run without one has neither.
func TestHTMLDrawsARevivedLease(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := HTML(&b, renewAfterExpiry(), RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`class="lease expired revived" data-owner="Worker-A" data-subject="EVENT-81" data-claim-seq="5"`,
		"revived after its end by Worker-A&#39;s renewal (#5)", "red-edged lease: revived"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	b.Reset()
	if err := HTML(&b, session18(), RunInfo{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), " revived\"") || strings.Contains(b.String(), "red-edged") {
		t.Error("session 18's page revives no lease, yet says so")
	}
}

// TestByMessageCountsEveryAttempt: a processing attempt is a claim that
// took the message, or a provider check no claim of its actor began; a
// claim followed by its check counts once, and a claim its claimer died on
// at once counts for nothing. A completion before any send
// puts the message in the view, red, whether the relay sent it never or
// only later.
func TestByMessageCountsEveryAttempt(t *testing.T) {
	t.Parallel()
	ev := func(seq int, actor string, kind lab.Kind, subject string) lab.Event {
		return lab.Event{Seq: seq, At: fmt.Sprintf("t=%d", seq), Actor: actor, Kind: kind, Subject: subject, Action: string(kind)}
	}
	tests := []struct {
		name   string
		events []lab.Event
		want   []messageRow
	}{
		{"ClaimThenCheck", []lab.Event{ev(1, "W-A", lab.KindClaim, "m1"), ev(2, "W-A", lab.KindWork, "m1")},
			[]messageRow{{Subject: "m1", Work: "W-A ×1", Sends: "-", Effects: "-"}}},
		{"CheckWithoutClaim", []lab.Event{ev(1, "W-A", lab.KindWork, "m1"), ev(2, "W-B", lab.KindWork, "m1")},
			[]messageRow{{Subject: "m1", Work: "W-A ×1, W-B ×1", Sends: "-", Effects: "-", WorkTwice: true}}},
		{"ClaimsWithoutChecks", []lab.Event{ev(1, "R-A", lab.KindClaim, "e1"), ev(2, "R-A", lab.KindOffer, "e1"),
			ev(3, "R-B", lab.KindClaim, "e1"), ev(4, "R-B", lab.KindWork, "e1"), ev(5, "R-B", lab.KindWork, "e1")},
			[]messageRow{{Subject: "e1", Work: "R-A ×1, R-B ×2", Sends: "R-A ×1", Effects: "-", WorkTwice: true}}},
		{"CrashedOnItsClaim", []lab.Event{ev(1, "W-A", lab.KindClaim, "m1"), ev(2, "W-A", lab.KindCrash, ""),
			ev(3, "W-B", lab.KindClaim, "m1"), ev(4, "W-B", lab.KindWork, "m1")},
			[]messageRow{{Subject: "m1", Work: "W-B ×1", Sends: "-", Effects: "-"}}},
		{"CrashedAfterItsWork", []lab.Event{ev(1, "W-A", lab.KindClaim, "m1"), ev(2, "W-A", lab.KindWork, "m1"), ev(3, "W-A", lab.KindCrash, ""),
			ev(4, "W-B", lab.KindClaim, "m1")},
			[]messageRow{{Subject: "m1", Work: "W-A ×1, W-B ×1", Sends: "-", Effects: "-", WorkTwice: true}}},
		{"NeverSent", []lab.Event{ev(1, "R-D", lab.KindClaim, "e5"), ev(2, "R-D", lab.KindUnsent, "e5")},
			[]messageRow{{Subject: "e5", Work: "R-D ×1", Sends: "-; marked complete, never sent: R-D ×1", Effects: "-", Unsent: true}}},
		{"SentLater", []lab.Event{ev(1, "R-D", lab.KindClaim, "e5"), ev(2, "R-D", lab.KindUnsent, "e5"), ev(3, "R-D", lab.KindOffer, "e5")},
			[]messageRow{{Subject: "e5", Work: "R-D ×1", Sends: "R-D ×1; marked complete before its send: R-D ×1", Effects: "-", Unsent: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := byMessage(newRace(&lab.Result{Timeline: tt.events})); !slices.Equal(got, tt.want) {
				t.Errorf("byMessage:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestHTMLDrawsWhatDecided: the page draws a fence (a token's refusal)
// apart from a refusal by another guard, which its data names, and a lost
// ack and an unsent completion with marks of their own.
func TestHTMLDrawsWhatDecided(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		edit  func(*lab.Event)
		glyph string
		data  string
	}{
		{"Token", func(e *lab.Event) { e.Refusal = lab.RefusedByToken }, `class="fenced-mark"`, `data-refusal="FENCED by the token"`},
		{"Lease", func(e *lab.Event) { e.Refusal = lab.RefusedByLease }, `class="guard-mark"`, `data-refusal="REFUSED: lease ended"`},
		{"AckLost", func(e *lab.Event) { e.Kind, e.Refusal = lab.KindAckLost, "" }, `class="lost-mark"`, `data-refusal=""`},
		{"Unsent", func(e *lab.Event) { e.Kind, e.Refusal, e.Rows = lab.KindUnsent, "", lab.RowsOf(1) }, `class="unsent-mark"`, `data-refusal=""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := session18()
			tc.edit(&r.Timeline[6])
			var b bytes.Buffer
			if err := HTML(&b, r, RunInfo{}); err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`(?s)<g class="ev [^"]*" tabindex="0" data-seq="7".*?</g>`).FindString(b.String())
			if !strings.Contains(m, tc.glyph) || !strings.Contains(m, tc.data) {
				t.Errorf("event #7 is drawn %s; want %s and %s", m, tc.glyph, tc.data)
			}
		})
	}
}

// TestLegendListsTheMarksOnThePage: the legend shows each mark the
// picture draws, once, in its kind's colour class, and no mark the
// picture does not draw; without offers or deliveries it names no arrow.
func TestLegendListsTheMarksOnThePage(t *testing.T) {
	r := &lab.Result{Scenario: "s", Title: "t", Timeline: []lab.Event{
		{Seq: 1, At: "t=0", Actor: "Worker-A", Action: "claim", Subject: "m1", Kind: lab.KindClaim},
		{Seq: 2, At: "t=1", Actor: "Worker-A", Action: "finalize", Subject: "m1", Kind: lab.KindFinalize},
		{Seq: 3, At: "t=2", Actor: "Worker-B", Action: "finalize", Subject: "m1", Kind: lab.KindFenced, Refusal: lab.RefusedByOwner},
		{Seq: 4, At: "t=3", Actor: "Worker-B", Action: "note", Kind: lab.KindNote},
	}}
	var buf strings.Builder
	if err := HTML(&buf, r, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	legend := page[strings.Index(page, `<div class="glyphs"`):]
	legend = legend[:strings.Index(legend, "</div>")]
	for _, want := range []string{`class="key k-claim"`, `class="key k-finalize"`, `class="guard-mark"`, `class="key k-note"`} {
		if strings.Count(legend, want) != 1 {
			t.Errorf("the legend shows %q %d times, want once:\n%s", want, strings.Count(legend, want), legend)
		}
	}
	for _, absent := range []string{`k-crash`, `k-effect`, `FENCED: a write a newer fencing token`, "offer to the broker", "delivery</span>"} {
		if strings.Contains(legend, absent) || (absent == "offer to the broker" && strings.Contains(page, absent)) {
			t.Errorf("the legend names %q, which the picture does not draw", absent)
		}
	}
}

// TestPagePrintsAsAHandout: the page carries a print stylesheet that
// shows the whole picture scaled to the paper, not a scrolled slice of it,
// and leaves out the pane that only hovering fills.
func TestPagePrintsAsAHandout(t *testing.T) {
	var buf strings.Builder
	if err := HTML(&buf, &lab.Result{Scenario: "s", Title: "t"}, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	printCSS := page[strings.Index(page, "@media print"):]
	for _, want := range []string{".scroll { overflow: visible", ".scroll svg { width: 100%", "#detail, svg .hit, .step { display: none; }"} {
		if !strings.Contains(printCSS, want) {
			t.Errorf("the print stylesheet lacks %q", want)
		}
	}
}

// TestAxisMarksWhereItIsNotToScale: a wait between two times is labelled
// with its length where there is room, and always in its title; events at
// one instant sit under a bracket that says so.
func TestAxisMarksWhereItIsNotToScale(t *testing.T) {
	r := &lab.Result{Scenario: "s", Title: "t", Timeline: []lab.Event{
		{Seq: 1, At: "2026-01-15T09:00:00.000Z", Actor: "Worker-A", Action: "claim", Kind: lab.KindClaim},
		{Seq: 2, At: "2026-01-15T09:00:00.000Z", Actor: "Worker-B", Action: "claim", Kind: lab.KindBlocked},
		{Seq: 3, At: "2026-01-15T09:00:05.000Z", Actor: "Worker-A", Action: "finalize", Kind: lab.KindFinalize},
		{Seq: 4, At: "2026-01-15T09:00:05.020Z", Actor: "Worker-B", Action: "note", Kind: lab.KindNote},
	}}
	var buf strings.Builder
	if err := HTML(&buf, r, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, `<g class="instant">`); n != 1 {
		t.Errorf("%d brackets of one instant, want 1 (the two claims)", n)
	}
	if !strings.Contains(page, `<title>5s later (the axis is not to scale`) || !strings.Contains(page, `>+5s</text>`) {
		t.Error("the 5 s wait is not labelled on the axis")
	}
	if !strings.Contains(page, `<title>20ms later (the axis is not to scale`) || strings.Contains(page, `>+20ms</text>`) {
		t.Error("the 20 ms wait, too narrow for a label, must still say its length in its title, and only there")
	}
}

func TestWaitText(t *testing.T) {
	for ms, want := range map[int64]string{250: "250ms", 2500: "2.5s", 5000: "5s", 150_000: "2m30s", 3_600_000: "1h",
		7_200_000 + 60_000: "2h1m", 3 * 86_400_000: "3d", 90_000_000: "25h"} {
		if got := waitText(ms); got != want {
			t.Errorf("waitText(%d) = %q, want %q", ms, got, want)
		}
	}
}

// TestHTMLShowsTheRealBrokersAnswers: a run on a real broker shows the
// tables of its own answers on the page, and only those of the report's
// tables.
func TestHTMLShowsTheRealBrokersAnswers(t *testing.T) {
	r := &lab.Result{Scenario: "s", Title: "T"}
	r.Tables = []lab.Table{
		{Title: "JetStream: acks", Note: "what it answered", Columns: []string{"Consumer", "Took"}, Rows: [][]string{{"C-1", "true"}}, RealBroker: true},
		{Title: "Ledger: claims", Columns: []string{"Relay"}, Rows: [][]string{{"Relay-A"}}},
	}
	var b strings.Builder
	if err := HTML(&b, r, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"What the real broker answered", "<h3>JetStream: acks</h3>", "<td>C-1</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "Ledger: claims") {
		t.Error("the page shows a table of the lab's own")
	}
}
