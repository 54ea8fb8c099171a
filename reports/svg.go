package reports

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

// Geometry of the picture, in pixels. The picture is at most svgWidth
// wide, so that a page fits a projector's 1,000 pixels without scrolling:
// a run longer than one row wraps into bands, each a full set of lanes
// showing the next stretch of the clock.
const (
	svgLabelW   = 160 // the lane names
	svgContentX = svgLabelW + 24
	svgWidth    = 940
	svgBandGap  = 18 // between two bands
	svgLaneH    = 66
	svgMarkY    = 28 // an event's mark, from its lane's top
	svgTop      = 44 // the clock axis above the lanes: tick labels, then waits
	svgStep     = 20 // between two events at the same time
	svgSegGap   = 70 // between two clock segments
	svgMaxGap   = 150
	// svgCharW is the width of a character of the picture's 12 px text,
	// roughly (digits, colons and most letters).
	svgCharW = 7.5
)

// band is one row of the picture: the stretch [from, to) of the layout's
// clock it shows, drawn shifted left by from - svgContentX, top pixels
// down the picture.
type band struct {
	index    int
	from, to float64
	top      float64
}

// holds reports whether the layout's x falls in the band.
func (bd band) holds(x float64) bool { return x >= bd.from && x < bd.to }

// shift is how far left the band's content is drawn.
func (bd band) shift() float64 { return bd.from - svgContentX }

// bands cuts the layout into rows of at most svgWidth pixels, each
// starting at a point of the clock (an event or a lease's end), so that no
// point is cut off.
func (lo layout) bands(blockH float64) []band {
	var xs []float64
	xs = append(xs, lo.evX...)
	for _, x := range lo.atX {
		xs = append(xs, x)
	}
	sort.Float64s(xs)
	clock := float64(svgWidth - svgContentX - 36) // room for the last mark and its label
	var out []band
	for i, x := range xs {
		if i == 0 || x-out[len(out)-1].from > clock {
			out = append(out, band{index: len(out), from: x, to: math.Inf(1), top: float64(len(out)) * (blockH + svgBandGap)})
			if len(out) > 1 {
				out[len(out)-2].to = x
			}
		}
	}
	if len(out) == 0 {
		out = append(out, band{from: svgContentX, to: math.Inf(1)})
	}
	return out
}

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

// svgOf draws the run: lanes, the clock axis, leases, events and arrows,
// in as many bands as the run needs to fit svgWidth.
func svgOf(rc race, statements []lab.Statement) string {
	lo := newLayout(rc)
	blockH := float64(svgTop + len(rc.Actors)*svgLaneH + 24) // below the lanes, where the clock restarts
	bands := lo.bands(blockH)
	width := math.Min(lo.width, svgWidth)
	if len(bands) > 1 {
		width = svgWidth
	}
	height := float64(len(bands))*(blockH+svgBandGap) - svgBandGap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="one swimlane per actor on the scenario clock">`, width, height, width, height)
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#cfe2f5"/><line x1="0" y1="0" x2="0" y2="6" stroke="#7fb3e6" stroke-width="3"/></pattern>` +
		`<marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#4a5568"/></marker>` +
		`<marker id="arrowhead-ok" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1f7a3d"/></marker>`)
	for _, bd := range bands {
		fmt.Fprintf(&b, `<clipPath id="band-%d"><rect x="%d" y="0" width="%.0f" height="%.0f"/></clipPath>`, bd.index, svgLabelW, width-svgLabelW, blockH)
	}
	b.WriteString(`</defs>`)
	for _, bd := range bands {
		fmt.Fprintf(&b, `<g class="band" data-band="%d" transform="translate(0,%.0f)">`, bd.index, bd.top)
		repeat := ""
		if bd.index > 0 {
			repeat = " repeat" // the lanes again, for the next stretch of the clock
		}
		b.WriteString(`<g class="lanes">`)
		for _, a := range rc.Actors {
			y := lo.laneY(a)
			fmt.Fprintf(&b, `<g class="lane%s" data-actor="%s"><rect class="lane-bg" x="0" y="%.0f" width="%.0f" height="%d"/><text class="lane-label" x="10" y="%.0f">%s</text></g>`,
				repeat, esc(a), y, width, svgLaneH, y+svgLaneH/2+4, esc(a))
		}
		b.WriteString(`</g>`)
		fmt.Fprintf(&b, `<g clip-path="url(#band-%d)"><g transform="translate(%.1f,0)">`, bd.index, -bd.shift())
		svgAxis(&b, rc, lo, bd, blockH)
		svgLeases(&b, rc, lo, bd)
		svgArrows(&b, rc, lo, bd)
		svgEvents(&b, rc, lo, bd, statements)
		b.WriteString(`</g></g></g>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// svgAxis draws a tick for every time on the clock, labelled where there
// is room, and a rule where the lesson restarts its clock.
func svgAxis(b *strings.Builder, rc race, lo layout, bd band, height float64) {
	b.WriteString(`<g class="axis">`)
	lastLabel, lastWidth := -1e9, 0.0
	lastDay := int64(-1)
	logical := len(rc.Events) > 0 && strings.Contains(rc.Events[0].At, "t=")
	labelWidth := func(label string) float64 { return svgCharW * float64(len(label)) }
	for _, p := range lo.ticks {
		key := [2]int64{int64(p.seg), p.t}
		x := lo.atX[key]
		day := p.t / 86400000
		if end := lo.endX[key]; x < bd.from && end >= bd.from {
			// An instant an earlier band began goes on here: say which.
			label := clockLabel(p.t, rc) + ", the same instant"
			fmt.Fprintf(b, `<g class="tick cont" data-seg="%d" data-t="%d"><text x="%.1f" y="16" text-anchor="start">%s</text>`+
				`<path class="instant" d="M%.1f,%d v-3 H%.1f v3"/></g>`, p.seg, p.t, bd.from-4, esc(label), bd.from-8, svgTop-2, math.Min(end, bd.to))
			lastLabel, lastWidth = bd.from-4+labelWidth(label)/2, labelWidth(label)
		}
		if !bd.holds(x) {
			if x < bd.from {
				lastDay = day // named in an earlier band
			}
			continue
		}
		label := ""
		// A tick on a new day always names its date: a lesson whose clock
		// crosses a day (session 20's three days) shows where. Otherwise a
		// tick is labelled only where its label clears the last one; a
		// band's first tick always is, as a row's start.
		text := clockLabel(p.t, rc)
		newDay := !logical && day != lastDay
		if newDay {
			text = time.UnixMilli(p.t).UTC().Format("Jan 2 ") + text
		}
		// A row's first label starts at its tick rather than centring on it.
		w := labelWidth(text)
		anchor, lx, center := "middle", x, x
		if x-w/2 < bd.from-8 {
			anchor, lx, center = "start", x-4, x-4+w/2
		}
		if center-lastLabel >= (lastWidth+w)/2+8 || newDay {
			label = text
			if newDay {
				lastDay = day
			}
			lastLabel, lastWidth = center, w
		}
		fmt.Fprintf(b, `<g class="tick" data-seg="%d" data-t="%d" data-x="%.1f"><line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f"/><text x="%.1f" y="16" text-anchor="%s">%s</text></g>`,
			p.seg, p.t, x, x, svgTop-6, x, height-24, lx, anchor, esc(label))
	}
	svgCompressions(b, lo, bd)
	for seg, x := range lo.segX {
		if seg == 0 || !bd.holds(x) {
			continue
		}
		rule := math.Max(x-svgSegGap/2, bd.from-20) // a band that opens with the restart draws it at its start
		fmt.Fprintf(b, `<g class="segment"><line x1="%.1f" y1="20" x2="%.1f" y2="%.0f"/><text x="%.1f" y="%.0f">%s</text></g>`,
			rule, rule, height-4, rule+4, height-8, esc(segLabel(rc, seg)))
	}
	b.WriteString(`</g>`)
}

// svgCompressions marks, on the axis, where the picture is not to scale:
// each wait between two times is drawn on a log scale, so it is labelled
// with how long it was ("+2.5s") where there is room (and in its title
// always); events at one instant are drawn apart, in the order recorded,
// under a bracket that says so.
func svgCompressions(b *strings.Builder, lo layout, bd band) {
	for i, p := range lo.ticks {
		key := [2]int64{int64(p.seg), p.t}
		x, end := lo.atX[key], lo.endX[key]
		if !bd.holds(x) {
			continue
		}
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
		if nx-end >= svgCharW*float64(len(wait))+8 && bd.holds(nx) {
			label = wait
		}
		fmt.Fprintf(b, `<g class="gap"><title>%s later (the axis is not to scale: a longer wait takes more room, on a log scale)</title>`+
			`<text x="%.1f" y="%d" text-anchor="middle">%s</text></g>`, waitText(next.t-p.t), (end+nx)/2, svgTop-9, label)
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
func svgLeases(b *strings.Builder, rc race, lo layout, bd band) {
	b.WriteString(`<g class="leases">`)
	labelEnd := map[string]float64{} // by lane: where its last lease label ends
	marks := map[string][]float64{}  // by lane: the x of each event's mark
	for i, e := range rc.Events {
		marks[e.Actor] = append(marks[e.Actor], lo.evX[i])
	}
	// clear reports whether a label from x, w wide, covers no mark in lane.
	clear := func(lane string, x, w float64) bool {
		for _, m := range marks[lane] {
			if m+8 > x && m-8 < x+w {
				return false
			}
		}
		return true
	}
	for _, l := range rc.Leases {
		x0 := lo.evX[l.Start]
		x1 := lo.atX[[2]int64{int64(l.Seg), l.To}]
		if l.End >= 0 {
			x1 = lo.evX[l.End]
		}
		if x1 < x0+4 {
			x1 = x0 + 4
		}
		if x1 < bd.from || x0 >= bd.to {
			continue // not in this band
		}
		y := lo.laneY(l.Owner) + svgMarkY - 8
		cls := "lease"
		if l.Expired() {
			cls += " expired"
		}
		if l.Revived {
			cls += " revived"
		}
		start := x0
		if x0 < bd.from {
			cls += " cont" // the rest of a lease an earlier band began
			start = bd.from - 14
		}
		end := math.Min(x1, bd.to+14)
		// data-seq is the claim's: step mode shows a lease with the
		// event that took it, and each renewal with its own.
		seq := rc.Events[l.Start].Seq
		fmt.Fprintf(b, `<rect class="%s" data-owner="%s" data-subject="%s" data-claim-seq="%d" data-seq="%d" x="%.1f" y="%.1f" width="%.1f" height="16" rx="3"><title>%s</title></rect>`,
			cls, esc(l.Owner), esc(l.Subject), seq, seq, start, y, end-start, esc(leaseTitle(rc, l)))
		if l.Expired() && bd.holds(x1) {
			fmt.Fprintf(b, `<line class="lease-end" data-seq="%d" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, seq, x1, y-6, x1, y+22)
		}
		// The label, at the first place on the bar where it covers no
		// event's mark and clears the last label in the lane.
		text := orDash(l.Subject)
		w := svgCharW * float64(len(text))
		for lx := math.Max(math.Max(x0, bd.from)+3, labelEnd[l.Owner]); lx+w <= math.Min(x1, bd.to); lx += 4 {
			if clear(l.Owner, lx, w) {
				fmt.Fprintf(b, `<text class="lease-label" data-seq="%d" x="%.1f" y="%.1f">%s</text>`, seq, lx, y+12, esc(text))
				labelEnd[l.Owner] = lx + w + 6
				break
			}
		}
		for _, ri := range l.Renewals {
			if rx := lo.evX[ri]; bd.holds(rx) {
				fmt.Fprintf(b, `<path class="renewal" data-seq="%d" d="M%.1f,%.1f l-5,-7 h10 z"/>`, rc.Events[ri].Seq, rx, y)
			}
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
func svgArrows(b *strings.Builder, rc race, lo layout, bd band) {
	broker, ok := lo.laneOf["broker"]
	if !ok {
		return
	}
	by := float64(svgTop+broker*svgLaneH) + svgMarkY
	b.WriteString(`<g class="arrows">`)
	// seq is the event the arrow belongs to, so step mode shows it with
	// that event.
	arrow := func(cls string, seq int, x0, y0, x1, y1 float64, title string) {
		if !bd.holds(x1) {
			return // drawn in the band of its head
		}
		marker := "arrowhead"
		if strings.Contains(cls, "deliver") {
			marker = "arrowhead-ok"
		}
		fmt.Fprintf(b, `<line class="arrow %s" data-seq="%d" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" marker-end="url(#%s)"><title>%s</title></line>`,
			cls, seq, x0, y0, x1, y1, marker, esc(title))
	}
	delivered := map[string]bool{}
	for i, e := range rc.Events {
		x := lo.evX[i]
		switch {
		case e.Kind == lab.KindOffer:
			y := lo.laneY(e.Actor) + svgMarkY
			arrow("offer", e.Seq, x, y, x+10, shorten(y, by), fmt.Sprintf("#%d %s offers %s to the broker (offer %s)", e.Seq, e.Actor, orDash(e.Subject), offerText(e.Offer)))
		case e.Kind == lab.KindDeliver && e.To != "":
			if _, ok := lo.laneOf[e.To]; ok {
				y := lo.laneY(e.To) + svgMarkY
				delivered[fmt.Sprintf("%s/%d", e.To, e.Offer)] = true
				arrow("deliver", e.Seq, x, by, x+10, shorten(by, y), fmt.Sprintf("#%d broker delivers offer %s to %s", e.Seq, offerText(e.Offer), e.To))
			}
		case isConsumer(e.Actor) && e.Offer != 0 && e.Kind != lab.KindCrash:
			key := fmt.Sprintf("%s/%d", e.Actor, e.Offer)
			if delivered[key] {
				continue
			}
			delivered[key] = true
			y := lo.laneY(e.Actor) + svgMarkY
			arrow("deliver implied", e.Seq, x-10, by, x, shorten(by, y), fmt.Sprintf("the broker delivers offer %d to %s (#%d)", e.Offer, e.Actor, e.Seq))
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
func svgEvents(b *strings.Builder, rc race, lo layout, bd band, statements []lab.Statement) {
	b.WriteString(`<g class="events">`)
	// An event's number goes under its mark, on the first of two rows
	// where it clears the numbers before it in its lane.
	rowEnd := map[string]*[2]float64{}
	for i, e := range rc.Events {
		x, y := lo.evX[i], lo.laneY(e.Actor)+svgMarkY
		if !bd.holds(x) {
			continue
		}
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
		ends := rowEnd[e.Actor]
		if ends == nil {
			ends = &[2]float64{math.Inf(-1), math.Inf(-1)}
			rowEnd[e.Actor] = ends
		}
		w := svgCharW * float64(len(fmt.Sprint(e.Seq)))
		row := 0
		if x-w/2 < ends[0]+2 && x-w/2 >= ends[1]+2 {
			row = 1
		}
		ends[row] = x + w/2
		fmt.Fprintf(b, `<text class="seq" x="%.1f" y="%.1f" text-anchor="middle">%d</text></g>`, x, y+22+13*float64(row), e.Seq)
	}
	b.WriteString(`</g>`)
}
