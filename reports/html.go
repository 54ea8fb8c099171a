package reports

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

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
		Result: resultLabel(r), Passed: r.Passed(), Lesson: lessonText(r), Graded: r.CustomSQL != "", Mistake: r.Mistake,
		MistakeShows: r.MistakeShows, DoesNotSolve: r.DoesNotSolve,
		Started: info.Started.UTC().Format("2006-01-02 15:04:05Z"),
		Verdict: r.Verdict, Broken: r.BrokenInvariants(), Checks: r.Checks,
		Facts: r.Facts, FactsNote: FactsNote,
		CSS: template.CSS(pageCSS), JS: template.JS(pageJS),
		SVG: template.HTML(svgOf(rc, r.Statements)), Concurrent: r.Concurrent, Glyphs: template.HTML(glyphLegend(rc)),
		Messages: byMessage(rc),
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
{{end}}<h2>Verdict</h2>
<div class="verdict" id="verdict"><p>{{.Verdict}}</p>{{range .Broken}}<p>{{.}}</p>{{end}}</div>
{{if .Variant}}<h2>The mistake</h2>
<p class="verdict">{{.Mistake}}</p>
<h2>What this run shows</h2>
{{range paragraphs .MistakeShows}}<p class="verdict">{{.}}</p>{{end}}
<h2>The lesson as designed (for comparison)</h2>
{{else if .Graded}}<h2>What this run grades</h2>
{{else}}<h2>What this lesson shows</h2>
{{end}}{{range paragraphs .Lesson}}<p class="verdict">{{.}}</p>{{end}}
{{if .DoesNotSolve}}<h2>What it does not solve</h2>
{{range paragraphs .DoesNotSolve}}<p class="verdict">{{.}}</p>{{end}}
{{end}}<script>{{.JS}}</script>
</body>
</html>
`))

// Geometry of the picture, in pixels.
const (
	svgLabelW = 130 // the lane names
	svgLaneH  = 52
	svgTop    = 34 // the clock axis above the lanes
	svgStep   = 20 // between two events at the same time
	svgSegGap = 70 // between two clock segments
	svgMaxGap = 150
)

// point is a place on the clock: an event, or a lease deadline no event marks.
type point struct {
	seg int
	t   int64
	ev  int // event index, -1 for a deadline
}

// layout gives every event, and every deadline where a lease ran out, an x
// on the scenario clock: time runs right, a longer wait takes more room
// (on a log scale), and events at the same time follow in recorded order.
type layout struct {
	evX    []float64
	atX    map[[2]int64]float64 // seg, t: the first point at that time
	ticks  []point
	endX   map[[2]int64]float64 // seg, t: the last point at that time (events at one instant are drawn apart)
	segX   []float64            // where each segment starts
	width  float64
	laneOf map[string]int
}

func newLayout(rc race) layout {
	var pts []point
	for i, e := range rc.Events {
		pts = append(pts, point{seg: e.Seg, t: e.T, ev: i})
	}
	for _, l := range rc.Leases {
		if l.Expired() {
			pts = append(pts, point{seg: l.Seg, t: l.To, ev: -1})
		}
	}
	sort.SliceStable(pts, func(i, j int) bool {
		a, b := pts[i], pts[j]
		if a.seg != b.seg {
			return a.seg < b.seg
		}
		if a.t != b.t {
			return a.t < b.t
		}
		return a.ev == -1 && b.ev != -1
	})
	lo := layout{evX: make([]float64, len(rc.Events)), atX: map[[2]int64]float64{}, endX: map[[2]int64]float64{}, laneOf: map[string]int{}}
	for i, a := range rc.Actors {
		lo.laneOf[a] = i
	}
	x := float64(svgLabelW + 24)
	for i, p := range pts {
		if i > 0 {
			prev := pts[i-1]
			switch {
			case p.seg != prev.seg:
				x += svgSegGap
			case p.t > prev.t:
				x += gapPx(p.t - prev.t)
			case p.ev >= 0 && prev.ev >= 0:
				x += svgStep
			}
		}
		if p.seg >= len(lo.segX) {
			lo.segX = append(lo.segX, x)
		}
		key := [2]int64{int64(p.seg), p.t}
		if _, ok := lo.atX[key]; !ok {
			lo.atX[key] = x
			lo.ticks = append(lo.ticks, p)
		}
		lo.endX[key] = x
		if p.ev >= 0 {
			lo.evX[p.ev] = x
		}
	}
	lo.width = x + 60
	return lo
}

// gapPx is the room a wait of ms milliseconds takes.
func gapPx(ms int64) float64 {
	return math.Min(svgMaxGap, svgStep+20*math.Log1p(float64(ms)/100))
}

func (lo layout) laneY(actor string) float64 {
	return float64(svgTop + lo.laneOf[actor]*svgLaneH)
}

// svgOf draws the run: lanes, the clock axis, leases, events and arrows.
func svgOf(rc race, statements []lab.Statement) string {
	lo := newLayout(rc)
	height := float64(svgTop + len(rc.Actors)*svgLaneH + 10)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="one swimlane per actor on the scenario clock">`, lo.width, height, lo.width, height)
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#cfe2f5"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7fb3e6" stroke-width="3"/></pattern>` +
		`<marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#4a5568"/></marker>` +
		`<marker id="arrowhead-ok" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1f7a3d"/></marker></defs>`)
	b.WriteString(`<g class="lanes">`)
	for _, a := range rc.Actors {
		y := lo.laneY(a)
		fmt.Fprintf(&b, `<g class="lane" data-actor="%s"><rect class="lane-bg" x="0" y="%.0f" width="%.0f" height="%d"/><text class="lane-label" x="10" y="%.0f">%s</text></g>`,
			esc(a), y, lo.width, svgLaneH, y+svgLaneH/2+4, esc(a))
	}
	b.WriteString(`</g>`)
	svgAxis(&b, rc, lo, height)
	svgLeases(&b, rc, lo)
	svgArrows(&b, rc, lo)
	svgEvents(&b, rc, lo, statements)
	b.WriteString(`</svg>`)
	return b.String()
}

// svgAxis draws a tick for every time on the clock, labelled where there
// is room, and a rule where the lesson restarts its clock.
func svgAxis(b *strings.Builder, rc race, lo layout, height float64) {
	b.WriteString(`<g class="axis">`)
	lastLabel, lastWidth := -1e9, 0.0
	lastDay := int64(-1)
	logical := len(rc.Events) > 0 && strings.Contains(rc.Events[0].At, "t=")
	// labelWidth is a label's width in the axis's 11 px font, roughly.
	labelWidth := func(label string) float64 { return 6.2 * float64(len(label)) }
	for _, p := range lo.ticks {
		x := lo.atX[[2]int64{int64(p.seg), p.t}]
		label := ""
		day := p.t / 86400000
		// A tick on a new day always names its date: a lesson whose clock
		// crosses a day (session 20's three days) shows where. Otherwise a
		// tick is labelled only where its label clears the last one.
		text := clockLabel(p.t, rc)
		if newDay := !logical && day != lastDay; x-lastLabel >= (lastWidth+labelWidth(text))/2+8 || newDay {
			label = text
			if newDay {
				label = time.UnixMilli(p.t).UTC().Format("Jan 2 ") + label
				lastDay = day
			}
			lastLabel, lastWidth = x, labelWidth(label)
		}
		fmt.Fprintf(b, `<g class="tick" data-seg="%d" data-t="%d" data-x="%.1f"><line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f"/><text x="%.1f" y="%d" text-anchor="middle">%s</text></g>`,
			p.seg, p.t, x, x, svgTop-6, x, height-10, x, svgTop-12, esc(label))
	}
	svgCompressions(b, lo)
	for seg, x := range lo.segX {
		if seg == 0 {
			continue
		}
		fmt.Fprintf(b, `<g class="segment"><line x1="%.1f" y1="4" x2="%.1f" y2="%.0f"/><text x="%.1f" y="12">%s</text></g>`,
			x-svgSegGap/2, x-svgSegGap/2, height-4, x-svgSegGap/2+4, esc(segLabel(rc, seg)))
	}
	b.WriteString(`</g>`)
}

// svgCompressions marks, on the axis, where the picture is not to scale:
// each wait between two times is drawn on a log scale, so it is labelled
// with how long it was ("+2.5s") where there is room (and in its title
// always); events at one instant are drawn apart, in the order recorded,
// under a bracket that says so.
func svgCompressions(b *strings.Builder, lo layout) {
	for i, p := range lo.ticks {
		key := [2]int64{int64(p.seg), p.t}
		x, end := lo.atX[key], lo.endX[key]
		if end > x {
			fmt.Fprintf(b, `<g class="instant"><title>one instant: the events drawn apart here happened at the same time, in this order</title>`+
				`<path d="M%.1f,%d v-3 H%.1f v3"/></g>`, x, svgTop-2, end)
		}
		if i+1 == len(lo.ticks) || lo.ticks[i+1].seg != p.seg {
			continue
		}
		next := lo.ticks[i+1]
		nx := lo.atX[[2]int64{int64(next.seg), next.t}]
		wait := "+" + waitText(next.t-p.t)
		label := ""
		if nx-end >= 44 {
			label = wait
		}
		fmt.Fprintf(b, `<g class="gap"><title>%s later (the axis is not to scale: a longer wait takes more room, on a log scale)</title>`+
			`<text x="%.1f" y="%d" text-anchor="middle">%s</text></g>`, waitText(next.t-p.t), (end+nx)/2, svgTop-3, label)
	}
}

// waitText is a wait of ms milliseconds in its largest units: "250ms",
// "2.5s", "2m30s", "1h", "3d".
func waitText(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", float64(ms)/1000), "0"), ".") + "s"
	case ms%86_400_000 == 0:
		return fmt.Sprintf("%dd", ms/86_400_000)
	}
	s := (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
	for _, zero := range []string{"0s", "0m"} {
		if strings.HasSuffix(s, "m"+zero) || strings.HasSuffix(s, "h"+zero) {
			s = strings.TrimSuffix(s, zero)
		}
	}
	return s
}

// clockLabel prints a segment time the way the lesson's clock does.
func clockLabel(ms int64, rc race) string {
	if len(rc.Events) > 0 && strings.Contains(rc.Events[0].At, "t=") {
		return fmt.Sprintf("t=%d", ms/1000)
	}
	s := fmt.Sprintf("%02d:%02d:%02d", (ms/3600000)%24, (ms/60000)%60, (ms/1000)%60)
	if ms%1000 != 0 {
		s += fmt.Sprintf(".%03d", ms%1000)
	}
	return s
}

// segLabel names a clock segment by its first event's clock prefix.
func segLabel(rc race, seg int) string {
	for _, e := range rc.Events {
		if e.Seg == seg {
			if label, _, _, ok := clockOf(e.At); ok && label != "" {
				return label
			}
			return fmt.Sprintf("clock restarts (#%d)", e.Seq)
		}
	}
	return ""
}

// svgLeases draws each lease as a bar in its owner's lane, from its claim
// to its finalize, or hatched to the deadline where it ran out, with a
// mark at each renewal; a lease a renewal revived after its end starts at
// that renewal, edged red.
func svgLeases(b *strings.Builder, rc race, lo layout) {
	b.WriteString(`<g class="leases">`)
	for _, l := range rc.Leases {
		x0 := lo.evX[l.Start]
		x1 := lo.atX[[2]int64{int64(l.Seg), l.To}]
		if l.End >= 0 {
			x1 = lo.evX[l.End]
		}
		if x1 < x0+4 {
			x1 = x0 + 4
		}
		y := lo.laneY(l.Owner) + svgLaneH/2 - 7
		cls := "lease"
		if l.Expired() {
			cls += " expired"
		}
		if l.Revived {
			cls += " revived"
		}
		fmt.Fprintf(b, `<rect class="%s" data-owner="%s" data-subject="%s" data-claim-seq="%d" x="%.1f" y="%.1f" width="%.1f" height="14" rx="3"><title>%s</title></rect>`,
			cls, esc(l.Owner), esc(l.Subject), rc.Events[l.Start].Seq, x0, y, x1-x0, esc(leaseTitle(rc, l)))
		if l.Expired() {
			fmt.Fprintf(b, `<line class="lease-end" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x1, y-6, x1, y+20)
		}
		fmt.Fprintf(b, `<text class="lease-label" x="%.1f" y="%.1f">%s</text>`, x0+3, y+11, esc(orDash(l.Subject)))
		for _, ri := range l.Renewals {
			rx := lo.evX[ri]
			fmt.Fprintf(b, `<path class="renewal" d="M%.1f,%.1f l-5,-7 h10 z"/>`, rx, y)
		}
	}
	b.WriteString(`</g>`)
}

func leaseTitle(rc race, l lease) string {
	s := fmt.Sprintf("%s's lease on %s from #%d", l.Owner, orDash(l.Subject), rc.Events[l.Start].Seq)
	if l.Revived {
		s = fmt.Sprintf("%s's lease on %s, revived after its end by %s's renewal (#%d)",
			l.Owner, orDash(l.Subject), rc.Events[l.Start].Actor, rc.Events[l.Start].Seq)
	}
	switch l.Ended {
	case endFinalized:
		s += fmt.Sprintf(" to its finalize (#%d)", rc.Events[l.End].Seq)
	case endTaken:
		s += fmt.Sprintf(" until %s took it while it was live (#%d)", l.By, rc.Events[l.End].Seq)
	case endRanOut:
		s += " until the clock ran it out, its owner still holding it"
	default:
		s += " to the end of the run"
	}
	if n := len(l.Renewals); n > 0 {
		s += "; renewed " + plural(n, "time")
	}
	if l.Revived {
		s += "; only a mistake renews a lease after its end"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "its message"
	}
	return s
}

// svgArrows draws offers (relay to broker) and deliveries (broker to
// consumer). A consumer that names an offer's delivery the broker did not
// record gets the delivery drawn at its first event about it.
func svgArrows(b *strings.Builder, rc race, lo layout) {
	broker, ok := lo.laneOf["broker"]
	if !ok {
		return
	}
	by := float64(svgTop+broker*svgLaneH) + svgLaneH/2
	b.WriteString(`<g class="arrows">`)
	arrow := func(cls string, x0, y0, x1, y1 float64, title string) {
		marker := "arrowhead"
		if strings.Contains(cls, "deliver") {
			marker = "arrowhead-ok"
		}
		fmt.Fprintf(b, `<line class="arrow %s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" marker-end="url(#%s)"><title>%s</title></line>`,
			cls, x0, y0, x1, y1, marker, esc(title))
	}
	delivered := map[string]bool{}
	for i, e := range rc.Events {
		x := lo.evX[i]
		switch {
		case e.Kind == lab.KindOffer:
			y := lo.laneY(e.Actor) + svgLaneH/2
			arrow("offer", x, y, x+10, shorten(y, by), fmt.Sprintf("#%d %s offers %s to the broker (offer %s)", e.Seq, e.Actor, orDash(e.Subject), offerText(e.Offer)))
		case e.Kind == lab.KindDeliver && e.To != "":
			if _, ok := lo.laneOf[e.To]; ok {
				y := lo.laneY(e.To) + svgLaneH/2
				delivered[fmt.Sprintf("%s/%d", e.To, e.Offer)] = true
				arrow("deliver", x, by, x+10, shorten(by, y), fmt.Sprintf("#%d broker delivers offer %s to %s", e.Seq, offerText(e.Offer), e.To))
			}
		case isConsumer(e.Actor) && e.Offer != 0 && e.Kind != lab.KindCrash:
			key := fmt.Sprintf("%s/%d", e.Actor, e.Offer)
			if delivered[key] {
				continue
			}
			delivered[key] = true
			y := lo.laneY(e.Actor) + svgLaneH/2
			arrow("deliver implied", x-10, by, x, shorten(by, y), fmt.Sprintf("the broker delivers offer %d to %s (#%d)", e.Offer, e.Actor, e.Seq))
		}
	}
	b.WriteString(`</g>`)
}

// offerText names a broker offer by its number, "-" for none.
func offerText(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// shorten stops an arrow short of its target's marker.
func shorten(from, to float64) float64 {
	if to > from {
		return to - 8
	}
	return to + 8
}

// svgEvents draws each event in its actor's lane, focusable, carrying its
// SQL and rows for the detail panel.
func svgEvents(b *strings.Builder, rc race, lo layout, statements []lab.Statement) {
	b.WriteString(`<g class="events">`)
	for i, e := range rc.Events {
		x, y := lo.evX[i], lo.laneY(e.Actor)+svgLaneH/2
		cls := "ev k-" + string(e.Kind)
		rows := ""
		if e.Rows != nil {
			rows = fmt.Sprint(*e.Rows)
		}
		fmt.Fprintf(b, `<g class="%s" tabindex="0" data-seq="%d" data-seg="%d" data-at="%s" data-actor="%s" data-action="%s" data-kind="%s" data-refusal="%s" data-detail="%s" data-rows="%s" data-x="%.1f" data-sql="%s" aria-label="%s">`,
			cls, e.Seq, e.Seg, esc(e.At), esc(e.Actor), esc(e.Action), e.Kind, esc(refusalText(e)), esc(e.Detail), rows, x, esc(sqlJSON(e, statements)),
			esc(fmt.Sprintf("#%d %s %s: %s", e.Seq, e.Actor, e.Action, e.Detail)))
		fmt.Fprintf(b, `<title>#%d %s %s %s: %s</title>`, e.Seq, esc(e.At), esc(e.Actor), esc(e.Action), esc(e.Detail))
		fmt.Fprintf(b, `<rect class="hit" x="%.1f" y="%.1f" width="16" height="30" rx="3"/>`, x-8, y-15)
		switch {
		case e.Kind == lab.KindFenced && e.Refusal != lab.RefusedByToken:
			b.WriteString(guardGlyph(x, y))
		case e.Kind == lab.KindOffer && e.AckLost:
			b.WriteString(glyph(lab.KindAckLost, x, y)) // stored, but the broker's ack never came back
		default:
			b.WriteString(glyph(e.Kind, x, y))
		}
		fmt.Fprintf(b, `<text class="seq" x="%.1f" y="%.1f" text-anchor="middle">%d</text></g>`, x, y+20, e.Seq)
	}
	b.WriteString(`</g>`)
}

// refusalText says, of a write a guard turned away, which guard, as the
// lane view words it: "FENCED" for a token, else the guard's label; ""
// for any other event.
func refusalText(e raceEvent) string {
	switch {
	case e.Kind == lab.KindOffer && e.AckLost:
		return "the broker's ack LOST"
	case e.Kind != lab.KindFenced:
		return ""
	case e.Refusal == lab.RefusedByToken:
		return "FENCED by the token"
	}
	return refusalLabels[e.Refusal]
}

// guardGlyph is the mark of a write a guard other than a fencing token
// turned away, at (x, y): a hollow square, where a fence is a full one.
func guardGlyph(x, y float64) string {
	return fmt.Sprintf(`<rect class="guard-mark" x="%.1f" y="%.1f" width="12" height="12"/>`, x-6, y-6)
}

// glyph is the mark of an event of kind at (x, y): each kind its own,
// as the page's legend shows them.
func glyph(kind lab.Kind, x, y float64) string {
	switch kind {
	case lab.KindCrash:
		return fmt.Sprintf(`<g class="crash-marker"><path class="crash-mark" d="M%.1f,%.1f l14,14 m0,-14 l-14,14"/><path class="crash-mark inner" d="M%.1f,%.1f l14,14 m0,-14 l-14,14"/></g>`,
			x-7, y-7, x-7, y-7)
	case lab.KindFenced, lab.KindRefused:
		return fmt.Sprintf(`<rect class="fenced-mark" x="%.1f" y="%.1f" width="12" height="12"/>`, x-6, y-6)
	case lab.KindAckLost:
		return fmt.Sprintf(`<circle class="lost-mark" cx="%.1f" cy="%.1f" r="5.5"/>`, x, y)
	case lab.KindUnsent:
		return fmt.Sprintf(`<rect class="unsent-mark" x="%.1f" y="%.1f" width="12" height="12"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">U</text>`, x-6, y-6, x, y+4)
	case lab.KindStale:
		return fmt.Sprintf(`<rect class="dot fenced-mark" x="%.1f" y="%.1f" width="12" height="12"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">S</text>`, x-6, y-6, x, y+4)
	case lab.KindSteal:
		return fmt.Sprintf(`<path class="steal-mark" d="M%.1f,%.1f l7,12 h-14 z"/>`, x, y-7)
	case lab.KindNoOp:
		return fmt.Sprintf(`<circle class="noop-mark" cx="%.1f" cy="%.1f" r="5.5"/>`, x, y)
	case lab.KindDone:
		return fmt.Sprintf(`<circle class="done-mark" cx="%.1f" cy="%.1f" r="5.5"/><line class="done-mark" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, y, x-4, y, x+4, y)
	case lab.KindError:
		return fmt.Sprintf(`<path class="error-mark" d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z"/><text class="glyph-letter" x="%.1f" y="%.1f" text-anchor="middle">!</text>`, x, y-6, x, y+4)
	case lab.KindEffect, lab.KindDedup:
		return fmt.Sprintf(`<path class="dot" d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z"/>`, x, y-6)
	case lab.KindBlocked:
		return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="5.5"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#b7791f" stroke-width="2"/>`, x, y, x-4, y+4, x+4, y-4)
	case lab.KindStall:
		return fmt.Sprintf(`<rect class="stall-mark" x="%.1f" y="%.1f" width="4" height="12"/><rect class="stall-mark" x="%.1f" y="%.1f" width="4" height="12"/>`, x-5, y-6, x+1, y-6)
	case lab.KindClaim, lab.KindFinalize, lab.KindRenew, lab.KindOffer:
		return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="5"/>`, x, y)
	}
	return fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="3.5"/>`, x, y)
}

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
