package reports

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

//go:embed htmlpage/page.css
var pageCSS string

//go:embed htmlpage/page.js
var pageJS string

// HTMLPath is where the HTML page of the text report at reportPath goes:
// beside it, with the same name.
func HTMLPath(reportPath string) string {
	return strings.TrimSuffix(reportPath, filepath.Ext(reportPath)) + ".html"
}

// WriteHTML renders r's page and files it beside its text report,
// reportPath, never over an existing file. It returns the path written.
func WriteHTML(reportPath string, r *lab.Result, info RunInfo) (string, error) {
	var buf bytes.Buffer
	if err := HTML(&buf, r, info); err != nil {
		return "", err
	}
	return WriteNew(HTMLPath(reportPath), buf.Bytes())
}

// HTML writes one self-contained page for r: the run as an SVG swimlane
// per actor on the scenario clock, the checks and the verdict. It loads
// nothing from the network: its style and script are inline.
func HTML(w io.Writer, r *lab.Result, info RunInfo) error {
	rc := newRace(r)
	page := htmlPage{
		Title: r.Title, Scenario: r.Scenario, Variant: r.Variant, Design: designLabel(r),
		Result: resultLabel(r), Passed: r.Passed(), Lesson: lessonText(r), Graded: r.CustomSQL != "", Relay: r.Relay != "", Mistake: r.Mistake,
		MistakeShows: r.MistakeShows, DoesNotSolve: r.DoesNotSolve,
		Started: info.Started.UTC().Format("2006-01-02 15:04:05Z"),
		Verdict: r.Verdict, Broken: r.BrokenInvariants(), Checks: r.Checks,
		Facts: r.Facts, FactsNote: FactsNote,
		CSS: template.CSS(pageCSS), JS: template.JS(pageJS),
		SVG: template.HTML(svgOf(rc, r.Statements)), Concurrent: r.Concurrent, Glyphs: template.HTML(glyphLegend(rc)),
		Messages: byMessage(rc),
	}
	for _, t := range r.Tables {
		if t.RealBroker {
			page.Broker = append(page.Broker, t)
		}
	}
	page.Parts = len(page.Messages) > 0 && page.Messages[0].Part != ""
	for _, l := range rc.Leases {
		page.Revived = page.Revived || l.Revived
	}
	page.Leases = len(rc.Leases) > 0
	lanes := map[string]bool{}
	for _, a := range rc.Actors {
		lanes[a] = true
	}
	for _, e := range rc.Events {
		page.Renewals = page.Renewals || e.Kind == lab.KindRenew
		page.Offers = page.Offers || e.Kind == lab.KindOffer
		// As svgArrows draws them: a delivery to a lane, or a consumer's
		// event that implies one.
		page.Deliveries = page.Deliveries || (e.Kind == lab.KindDeliver && lanes[e.To]) ||
			(isConsumer(e.Actor) && e.Offer != 0 && e.Kind != lab.KindCrash)
	}
	return pageTemplate.Execute(w, page)
}

// htmlPage is what the page template shows.
type htmlPage struct {
	Title, Scenario, Variant, Design, Result, Lesson, Mistake, Started, Verdict string
	MistakeShows, DoesNotSolve                                                  string
	Passed, Concurrent                                                          bool
	Graded                                                                      bool // a student's file in the lesson's slot: the lesson's own text is left out
	Relay                                                                       bool // a challenge's run of the user's relay
	Revived                                                                     bool // a renewal revived an ended lease: the legend says how it is drawn
	// Leases, Renewals, Offers and Deliveries say what the picture draws
	// besides its marks: the legend names only those.
	Leases, Renewals, Offers, Deliveries bool
	Broken                               []string
	Checks                               []lab.Check
	Facts                                []lab.Fact // the figures the script fixes: no checks
	FactsNote                            string
	CSS                                  template.CSS
	JS                                   template.JS
	SVG, Glyphs                          template.HTML
	Messages                             []messageRow
	Parts                                bool // the messages' rows name their part of the run
	// Broker are a real broker's own answers (--broker nats).
	Broker []lab.Table
}

// messageRow is one message of the page's per-message view: what each
// actor did to it, by kind of work, in one part of the run.
type messageRow struct {
	Part                              string // the clock segment's label, when the run has more than one
	Subject                           string
	Work, Sends, Effects              string
	WorkTwice, SentTwice, EffectTwice bool
	// Unsent says the message was marked complete before its send, or
	// with none.
	Unsent bool
}

// byMessage is the per-message view: one row per message the timeline's
// processing attempts, sends, completions or effects name, in order of
// first mention, with each actor's count; a row is flagged where a kind of
// work happened more than once, or where a message was marked complete
// though never sent. A processing attempt is a claim that took the
// message (unless its claimer's next event is its crash: it did nothing
// with it), or a status check at the provider (a work event) its actor
// made without such a claim before it: every attempt counts once, whether
// the lesson's workers claim first or load and work. Effects are counted
// per consumer service (the group the broker delivers to, read off the
// event's Service; an effect with none counts for its actor), naming the
// instances that made them: a second effect of one event by one service is
// red whichever instance made it. The view is empty when no message had
// any. A run in parts (clock segments: a lesson that restarts its clock,
// on a fresh database) counts each part apart, one row per message and
// part, naming the part: a message handled once in each part was not
// handled twice.
func byMessage(rc race) []messageRow {
	type message struct {
		seg     int
		subject string
	}
	type holder struct {
		m     message
		actor string
	}
	var messages []message
	work, sends, effects := map[message]*tally{}, map[message]*tally{}, map[message]*tally{}
	unsent, early := map[message]*tally{}, map[message]*tally{} // completions never sent, or sent only after
	taken := map[holder]bool{}                                  // a claim took the message and no work event has counted against it yet
	justTook := map[string]*message{}                           // by actor: the message its last event took, nil after any other
	for _, e := range rc.Events {
		took := justTook[e.Actor]
		justTook[e.Actor] = nil
		if e.Kind == lab.KindCrash && took != nil {
			work[*took].remove(e.Actor) // it died before it did anything with what it took: no attempt
			continue
		}
		if e.Subject == "" {
			continue
		}
		m := message{e.Seg, e.Subject}
		var t map[message]*tally
		key := e.Actor
		switch e.Kind {
		case lab.KindClaim, lab.KindSteal:
			t, taken[holder{m, e.Actor}], justTook[e.Actor] = work, true, &m
		case lab.KindWork:
			if taken[holder{m, e.Actor}] {
				taken[holder{m, e.Actor}] = false // the attempt its claim began, counted there
				continue
			}
			t = work
		case lab.KindOffer:
			t = sends
		case lab.KindUnsent:
			t = unsent
			if e.SentLater {
				t = early
			}
		case lab.KindEffect:
			t = effects
			if e.Service != "" {
				key = e.Service
			}
		default:
			continue
		}
		if work[m] == nil {
			messages = append(messages, m)
			work[m], sends[m], unsent[m], early[m], effects[m] = &tally{}, &tally{}, &tally{}, &tally{}, &tally{}
		}
		t[m].add(key, e.Actor)
	}
	segmented := len(rc.Events) > 0 && rc.Events[len(rc.Events)-1].Seg > 0
	var rows []messageRow
	for _, m := range messages {
		row := messageRow{Subject: m.subject, Work: work[m].String(), Sends: sends[m].String(), Effects: effects[m].String(),
			WorkTwice: work[m].total() > 1, SentTwice: sends[m].total() > 1, EffectTwice: effects[m].most() > 1}
		if unsent[m].total() > 0 {
			row.Sends += "; marked complete, never sent: " + unsent[m].String()
		}
		if early[m].total() > 0 {
			row.Sends += "; marked complete before its send: " + early[m].String()
		}
		row.Unsent = unsent[m].total()+early[m].total() > 0
		if segmented {
			row.Part = segLabel(rc, m.seg)
		}
		rows = append(rows, row)
	}
	return rows
}

// tally counts one kind of work on one message by key (an actor, or for
// effects a consumer service), and the actors behind each key.
type tally struct {
	order  []string
	counts map[string]int
	actors map[string]*tally // per key, when an actor other than the key counted for it
}

func (t *tally) add(key, actor string) {
	if t.counts == nil {
		t.counts, t.actors = map[string]int{}, map[string]*tally{}
	}
	if t.counts[key] == 0 {
		t.order = append(t.order, key)
	}
	t.counts[key]++
	if actor != key {
		if t.actors[key] == nil {
			t.actors[key] = &tally{}
		}
		t.actors[key].add(actor, actor)
	}
}

// remove takes back one count of key (counted for key itself).
func (t *tally) remove(key string) {
	if t.counts[key] == 0 {
		return
	}
	if t.counts[key]--; t.counts[key] == 0 {
		t.order = slices.DeleteFunc(t.order, func(k string) bool { return k == key })
	}
}

func (t *tally) total() int {
	n := 0
	for _, k := range t.order {
		n += t.counts[k]
	}
	return n
}

func (t *tally) most() int {
	n := 0
	for _, k := range t.order {
		n = max(n, t.counts[k])
	}
	return n
}

// String is each key's count, in order of first mention, with the actors
// behind a key that is not an actor: "credit-service ×2 (Consumer-1 ×1,
// Consumer-2 ×1)"; "-" for none.
func (t *tally) String() string {
	var parts []string
	for _, k := range t.order {
		part := fmt.Sprintf("%s ×%d", k, t.counts[k])
		if a := t.actors[k]; a != nil {
			part += " (" + a.String() + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// legendMark is one mark of the page's legend: the kind whose class
// colours it, how it is drawn, and what it means.
type legendMark struct {
	kind  lab.Kind
	glyph string
	text  string
}

// markOf is the legend's entry for an event as svgEvents draws it: its
// mark and its meaning, keyed by what distinguishes the drawing (a fence
// by a token from a refusal by another guard, an offer whose ack was lost).
func markOf(e raceEvent) (key string, m legendMark) {
	switch {
	case e.Kind == lab.KindFenced && e.Refusal != lab.RefusedByToken:
		return "guard", legendMark{lab.KindFenced, guardGlyph(9, 9), "REFUSED: a write another guard turned away (an owner, " +
			"a status, a lease end, a deadline, a shorter lease, an old receipt): 0 rows; its detail names the guard"}
	case e.Kind == lab.KindOffer && e.AckLost:
		return "offer-ack-lost", legendMark{lab.KindAckLost, glyph(lab.KindAckLost, 9, 9), "a send the broker stored, whose ack " +
			"never came back: its relay believes it failed"}
	}
	text, ok := markTexts[e.Kind]
	if !ok {
		text = "another step: " + strings.Join(otherKinds, ", ")
		return "other", legendMark{lab.KindNote, glyph(lab.KindNote, 9, 9), text}
	}
	return string(e.Kind), legendMark{e.Kind, glyph(e.Kind, 9, 9), text}
}

// markTexts say what each kind of event's own mark means.
var markTexts = map[lab.Kind]string{
	lab.KindClaim:    "a claim took a free or expired lease",
	lab.KindSteal:    "a claim took a live lease or work already done (only a mistake does)",
	lab.KindBlocked:  "a claim a live lease turned away",
	lab.KindDone:     "a claim found the work done",
	lab.KindRefused:  "a claim refused although the lease had ended (the claim's fault)",
	lab.KindRenew:    "a renewal extended a lease",
	lab.KindFinalize: "the owner's last write changed its row (a finalize, a completion, an ack)",
	lab.KindFenced:   "FENCED: a write a newer fencing token turned away: 0 rows",
	lab.KindNoOp:     "the owner's write changed 0 rows: the work was done",
	lab.KindStale:    "a write changed a row its writer no longer owned",
	lab.KindOffer:    "a relay's send: the broker stored an offer",
	lab.KindAckLost:  "a consumer's ack lost on the way: the broker never saw it",
	lab.KindUnsent:   "a completion of a message its relay had not sent (only a mistake does)",
	lab.KindStall:    "a stall",
	lab.KindCrash:    "a crash",
	lab.KindError:    "a statement failed",
	lab.KindEffect:   "a consumer's effect",
	lab.KindDedup:    "a consumer's guard found a duplicate: no effect",
	lab.KindCommit:   "a producer committed its data and its outbox row",
}

// otherKinds are the steps drawn with the small grey dot, in words.
var otherKinds = []string{"a start or a phase", "a claim that found nothing", "a lease running out", "a wake",
	"a status check at the provider", "a delivery", "an ack the broker received"}

// glyphLegend draws the mark of each kind of event on the page, once, in
// the order they first appear, with what it means: the legend lists
// exactly the marks the picture holds, in the colours it draws them.
func glyphLegend(rc race) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, e := range rc.Events {
		key, m := markOf(e)
		if seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(&b, `<span><svg width="18" height="18" viewBox="0 0 18 18" aria-hidden="true"><g class="key k-%s">%s</g></svg>%s</span>`,
			m.kind, m.glyph, esc(m.text))
	}
	return b.String()
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"paragraphs": Paragraphs}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Scenario}}{{if .Variant}} --variant {{.Variant}}{{end}}: {{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">{{.Scenario}}{{if .Variant}} --variant {{.Variant}}{{end}} &middot; run {{.Started}} &middot;
<span class="badge {{if .Passed}}pass{{else}}fail{{end}}" id="result">{{.Result}}</span></p>
<p class="design">{{.Design}}</p>
{{if .Mistake}}<p class="design"><strong>The mistake:</strong> {{.Mistake}}.</p>{{end}}
{{if or .Leases .Offers .Deliveries}}<div class="legend" aria-label="legend">
{{if .Leases}}<span style="--c:#7fb3e6">lease, from its claim to its owner's last write (labelled with its message)</span>
<span style="--c:#2b6cb0">{{if .Renewals}}renewal; {{end}}dashed end: the clock ran it out, or another claim took it</span>
{{end}}{{if .Revived}}<span style="--c:#c81e1e">red-edged lease: revived by a renewal after it had ended (only a mistake does)</span>
{{end}}{{if .Offers}}<span style="--c:#4a5568">offer to the broker</span>
{{end}}{{if .Deliveries}}<span style="--c:#1f7a3d">delivery</span>
{{end}}</div>{{end}}
<div class="glyphs" aria-label="the marks">{{.Glyphs}}</div>
{{if .Concurrent}}<p class="meta">The workers ran concurrently: the order of these events varies from run to run; the checks do not.</p>{{end}}
{{if .Messages}}<h2>By message: who worked on each</h2>
<p class="meta">One row per message{{if .Parts}} and part of the run (each part on a clock and a database of its own){{end}}, from the timeline: the processing attempts (each claim that took it, unless its claimer crashed next, and each status check at the provider no claim began), the sends to the broker and any completion without one, each with the actor that made it, and the consumers' effects, by consumer service (the group the broker delivers to) with the instances that made them. Red: done more than once{{if .Parts}} in one part{{end}}, or marked complete before any send; an effect, more than once by one service, whichever instance.</p>
<table id="messages">
<thead><tr>{{if .Parts}}<th>Part</th>{{end}}<th>Message</th><th>Processing attempts</th><th>Sends</th><th>Effects</th></tr></thead>
<tbody>{{range .Messages}}<tr>{{if $.Parts}}<td class="part">{{.Part}}</td>{{end}}<td class="message">{{.Subject}}</td><td class="work{{if .WorkTwice}} fail{{end}}">{{.Work}}</td><td class="sends{{if or .SentTwice .Unsent}} fail{{end}}">{{.Sends}}</td><td class="effects{{if .EffectTwice}} fail{{end}}">{{.Effects}}</td></tr>
{{end}}</tbody>
</table>{{end}}
<p class="meta">To lecture from it: press &rarr; to reveal the events one at a time, each in large type (&larr; back, Page Down and Page Up by part, End shows them all).</p>
<div class="step" id="step" aria-live="polite" hidden></div>
<div class="picture">
<div class="scroll">{{.SVG}}</div>
<aside id="detail" aria-live="polite"><h3>Events</h3><p>Hover over or focus (Tab) an event to see what it did, the rows it changed and the run's statements for that kind of event.</p></aside>
</div>
<h2>Checks</h2>
<table id="checks">
<thead><tr><th>Check</th><th>What it proves</th><th>Expected</th><th>Observed</th><th>Result</th></tr></thead>
<tbody>{{range .Checks}}<tr><td>{{.Name}}</td><td>{{.About}}</td><td>{{.Expected}}</td><td>{{.Observed}}</td>{{if .Passed}}<td class="pass">PASS</td>{{else}}<td class="fail">FAIL</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{if .Facts}}<h2>Facts of the setup (not checks)</h2>
<p class="meta">{{.FactsNote}}</p>
<table id="facts">
<thead><tr><th>Fact</th><th>What it counts</th><th>Value</th><th>Why the script fixes it</th></tr></thead>
<tbody>{{range .Facts}}<tr><td>{{.Name}}</td><td>{{.About}}</td><td>{{.Value}}</td><td>{{.Why}}</td></tr>
{{end}}</tbody>
</table>
{{end}}{{if .Broker}}<h2>What the real broker answered</h2>
{{range .Broker}}<h3>{{.Title}}</h3><p class="note">{{.Note}}</p>
<table><thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody></table>
{{end}}{{end}}<h2>Verdict</h2>
<div class="verdict" id="verdict"><p>{{.Verdict}}</p>{{range .Broken}}<p>{{.}}</p>{{end}}</div>
{{if .Variant}}<h2>The mistake</h2>
<p class="verdict">{{.Mistake}}</p>
<h2>What this run shows</h2>
{{range paragraphs .MistakeShows}}<p class="verdict">{{.}}</p>{{end}}
<h2>The lesson as designed (for comparison)</h2>
{{else if .Graded}}<h2>What this run grades</h2>
{{else if .Relay}}<h2>What this run tried</h2>
{{else}}<h2>What this lesson shows</h2>
{{end}}{{range paragraphs .Lesson}}<p class="verdict">{{.}}</p>{{end}}
{{if .DoesNotSolve}}<h2>What it does not solve</h2>
{{range paragraphs .DoesNotSolve}}<p class="verdict">{{.}}</p>{{end}}
{{end}}<script>{{.JS}}</script>
</body>
</html>
`))

// statementKeys are the words of the ledger's statement names that belong
// to each kind of event.
var statementKeys = map[lab.Kind][]string{
	lab.KindClaim:    {"claim"},
	lab.KindSteal:    {"claim"},
	lab.KindBlocked:  {"claim"},
	lab.KindDone:     {"claim"},
	lab.KindRefused:  {"claim"},
	lab.KindRenew:    {"renew"},
	lab.KindFinalize: {"finalize", "complete", "relay: ack", "mark processed", "apply the provider"},
	lab.KindNoOp:     {"finalize", "complete", "relay: ack"},
	lab.KindStale:    {"finalize", "complete", "relay: ack", "renew"},
	lab.KindOffer:    {"broker: offer"},
	lab.KindDeliver:  {"select the next offer", "mark delivered"},
	lab.KindEffect:   {"consumer:"},
	lab.KindDedup:    {"consumer: inbox"},
	lab.KindAck:      {"broker: ack"},
	lab.KindUnsent:   {"complete"},
	lab.KindCommit:   {"checkout", "insert an outbox", "insert event"},
}

// sqlJSON is the ledger's statements that an event of its kind runs, as
// JSON for the page's script: name, SQL, runs and rows.
func sqlJSON(e raceEvent, statements []lab.Statement) string {
	keys := statementKeys[e.Kind]
	switch {
	case e.Kind == lab.KindFenced && e.Offer != 0:
		keys = statementKeys[lab.KindAck] // a consumer's ack the broker's guards refused
	case e.Kind == lab.KindFenced:
		keys = append(statementKeys[lab.KindFinalize], statementKeys[lab.KindRenew]...)
	}
	type stmt struct {
		Name string `json:"name"`
		SQL  string `json:"sql"`
		Runs int    `json:"runs"`
		Rows int64  `json:"rows"`
	}
	out := []stmt{}
	for _, s := range statements {
		if s.Audit || s.Omitted || s.Runs == 0 {
			continue
		}
		name := strings.ToLower(s.Name)
		for _, k := range keys {
			if strings.Contains(name, k) {
				out = append(out, stmt{Name: s.Name, SQL: strings.TrimSpace(s.SQL), Runs: s.Runs, Rows: s.Rows})
				break
			}
		}
	}
	j, _ := json.Marshal(out)
	return string(j)
}

// esc escapes text for an SVG attribute or element.
func esc(s string) string { return template.HTMLEscapeString(s) }
