package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

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
