package reports

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

// laneWidth is the most columns the lane view takes, so it prints anywhere.
const laneWidth = 120

// LaneLegend explains the lane view's marks; it is printed above it.
const LaneLegend = "One column per actor, one row per timeline event (the # column), time running down. " +
	"A lease is a bar in its owner's column: '+' where a claim took it, '|' while it is held, " +
	"'=' where the owner finalized it, '~ expired' where it ran out. " +
	"XX marks a crash, !! a write a guard turned away (0 rows) or a rejected finalize, " +
	"!S a write that succeeded after its writer's lease ended, '#' a claim a live lease blocked, ?R a claim refused although " +
	"the lease had ended (the claim's own fault)."

// Lanes writes the lane view of r's timeline: one column per actor, one row
// per event, leases as bars. It fits [laneWidth] columns, merging the
// quietest actors into one column when there are too many, and uses ASCII
// only. When r.Concurrent its rows are preceded by [InterleavedNote].
func Lanes(w io.Writer, r *lab.Result) error {
	rc := newRace(r)
	if len(rc.Events) == 0 {
		_, err := fmt.Fprintln(w, "(no entries)")
		return err
	}
	cols, colOf, shared := laneColumns(rc)
	clocks := make([]string, len(rc.Events))
	seqW, clockW := len("#"), len("Clock")
	whole := true
	for _, e := range rc.Events {
		whole = whole && e.T%1000 == 0
	}
	for i, e := range rc.Events {
		clocks[i] = shortClock(e.At, r.Timeline)
		if whole {
			clocks[i] = strings.Replace(clocks[i], ".000", "", 1)
		}
		clockW = max(clockW, len(clocks[i]))
		seqW = max(seqW, len(fmt.Sprint(e.Seq)))
	}
	cells := laneCells(rc, colOf, len(cols), shared)
	// Each column is " cell |": the width left after # and Clock, shared.
	fixed := 1 + (seqW + 3) + (clockW + 3)
	cw := columnWidths(cols, cells, laneWidth-fixed)

	var b strings.Builder
	border := "+" + strings.Repeat("-", seqW+2) + "+" + strings.Repeat("-", clockW+2) + "+"
	header := "| " + pad("#", seqW) + " | " + pad("Clock", clockW) + " |"
	for c, name := range cols {
		border += strings.Repeat("-", cw[c]+2) + "+"
		header += " " + pad(name, cw[c]) + " |"
	}
	b.WriteString(border + "\n" + header + "\n" + border + "\n")
	for i, e := range rc.Events {
		line := "  " + pad(fmt.Sprint(e.Seq), seqW) + "   " + pad(clocks[i], clockW) + "  "
		for c := range cols {
			line += "  " + pad(cells[i][c], cw[c]) + " "
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	b.WriteString(border + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// laneColumns chooses the columns: every actor when they fit at a readable
// width, otherwise the busiest actors and one "others" column for the
// quietest; shared is the index of that column, -1 when there is none.
// Actors holding leases are merged last.
func laneColumns(rc race) (cols []string, colOf map[string]int, shared int) {
	const minCell = 10
	fits := func(n int) bool { return n*(minCell+3) <= laneWidth-28 }
	var actors []string
	for _, a := range rc.Actors {
		if a != rc.Added {
			actors = append(actors, a)
		}
	}
	keep := append([]string(nil), actors...)
	if !fits(len(keep)) {
		count := map[string]int{}
		for _, e := range rc.Events {
			count[e.Actor]++
		}
		for _, l := range rc.Leases {
			count[l.Owner] += 1000
		}
		byQuiet := append([]string(nil), actors...)
		sort.SliceStable(byQuiet, func(i, j int) bool { return count[byQuiet[i]] < count[byQuiet[j]] })
		merged := map[string]bool{}
		for n := 0; !fits(len(actors)-len(merged)+1) && n < len(byQuiet); n++ {
			merged[byQuiet[n]] = true
		}
		keep = keep[:0]
		for _, a := range actors {
			if !merged[a] {
				keep = append(keep, a)
			}
		}
		colOf = map[string]int{}
		for i, a := range keep {
			colOf[a] = i
		}
		for a := range merged {
			colOf[a] = len(keep)
		}
		return append(keep, "others"), colOf, len(keep)
	}
	colOf = map[string]int{}
	for i, a := range keep {
		colOf[a] = i
	}
	return keep, colOf, -1
}

// laneCells fills the grid: each event's mark and action in its actor's
// column, and each lease's bar in its owner's column. Column shared, -1
// for none, holds the merged actors: its cells name their actor.
func laneCells(rc race, colOf map[string]int, ncols, shared int) [][]string {
	cells := make([][]string, len(rc.Events))
	for i := range cells {
		cells[i] = make([]string, ncols)
	}
	barAt := make([][]bool, len(rc.Events))
	for i := range barAt {
		barAt[i] = make([]bool, ncols)
	}
	ends := map[[2]int]string{} // row, column: how a lease ended there
	for _, l := range rc.Leases {
		c, ok := colOf[l.Owner]
		if !ok {
			continue
		}
		last := l.Start
		for j := l.Start + 1; j < len(rc.Events); j++ {
			e := rc.Events[j]
			if l.End >= 0 && j > l.End || l.End < 0 && (e.Seg != l.Seg || e.T >= l.To) {
				break
			}
			barAt[j][c] = true
			last = j
		}
		if l.Expired && last+1 < len(rc.Events) && rc.Events[last+1].Seg == l.Seg {
			if _, taken := ends[[2]int{last + 1, c}]; !taken {
				ends[[2]int{last + 1, c}] = "~"
			}
		}
	}
	for i, e := range rc.Events {
		c := colOf[e.Actor]
		text := laneText(e, c == shared)
		mark := laneMark(e)
		switch {
		case mark != "":
		case e.Kind == KindClaim:
			mark = "+"
		case e.Kind == KindFinalize && barAt[i][c]:
			mark = "="
		case barAt[i][c]:
			mark = "|"
		}
		if mark != "" {
			text = mark + " " + text
		}
		cells[i][c] = text
	}
	for i := range cells {
		for c := range cells[i] {
			switch {
			case cells[i][c] != "":
			case ends[[2]int{i, c}] != "":
				cells[i][c] = "~ expired"
			case barAt[i][c]:
				cells[i][c] = "|"
			}
		}
	}
	return cells
}

// laneMark is the mark that makes the eye find an event, "" for none.
func laneMark(e raceEvent) string {
	switch {
	case e.Kind == KindCrash:
		return "XX"
	case e.Kind == KindFenced || e.Kind == KindRejected:
		return "!!"
	case e.Stale:
		return "!S"
	case e.Kind == KindBlocked:
		return "#"
	case e.Kind == KindRefused:
		return "?R"
	}
	return ""
}

// laneText is what an event's cell says: a short label by kind, naming
// the actor when the column holds several.
func laneText(e raceEvent, shared bool) string {
	verb := e.Action
	if f := strings.Fields(e.Action); len(f) > 0 {
		verb = f[0]
	}
	text := e.Action
	switch e.Kind {
	case KindClaim:
		text = "claim"
	case KindBlocked:
		text = "claim blocked"
	case KindRefused:
		text = "claim REFUSED"
	case KindRenew:
		text = "renew"
	case KindFinalize, KindOffer:
		text = verb
	case KindFenced:
		text = "FENCED " + verb
		if strings.Contains(e.Action, "refused") {
			// A renewal a guard turned away (0 rows), perhaps by its
			// deadline, not by a newer token: not a fence.
			text = "REFUSED " + verb
		}
	case KindRejected:
		text = "REJECTED " + verb
	case KindCrash:
		text = "CRASH"
	case KindExpiry:
		text = "lease expiry"
	}
	if e.Subject != "" && !strings.Contains(text, e.Subject) && e.Kind != KindNote && e.Kind != KindCommit {
		text += " " + e.Subject
	}
	if shared {
		text = e.Actor + ": " + text
	}
	return text
}

// shortClock drops the date when every event shares it (else the year),
// and the trailing Z.
func shortClock(at string, all []lab.Event) string {
	_, _, date, ok := clockOf(at)
	if !ok || date == "" {
		return at
	}
	for _, e := range all {
		if _, _, d, ok := clockOf(e.At); ok && d != date {
			return strings.TrimSuffix(strings.Replace(at, date+"T", date[5:]+" ", 1), "Z")
		}
	}
	return strings.TrimSuffix(strings.Replace(at, date+"T", "", 1), "Z")
}

// columnWidths gives each actor column the width its widest cell needs (at
// most laneCellMax), then, while the columns do not fit in budget, takes a
// character from the widest: a quiet column stays narrow and a busy one
// keeps its labels whole where the view has room.
func columnWidths(cols []string, cells [][]string, budget int) []int {
	w := make([]int, len(cols))
	for c, name := range cols {
		w[c] = min(laneCellMax, max(len(name), 5))
		for _, row := range cells {
			w[c] = min(laneCellMax, max(w[c], len(row[c])))
		}
	}
	total := func() int {
		n := 0
		for _, x := range w {
			n += x + 3
		}
		return n
	}
	for total() > budget {
		widest := 0
		for c := range w {
			if w[c] > w[widest] {
				widest = c
			}
		}
		if w[widest] <= 5 {
			break
		}
		w[widest]--
	}
	return w
}

// laneCellMax is the widest an actor's column may grow.
const laneCellMax = 24

// pad cuts s to width (marking the cut with '.') or pads it with spaces;
// it replaces any non-ASCII byte so the view stays ASCII.
func pad(s string, width int) string {
	var b strings.Builder
	for _, r := range s {
		if r > 126 || r < 32 {
			r = '?'
		}
		b.WriteRune(r)
	}
	s = b.String()
	if len(s) > width {
		if width <= 1 {
			return s[:width]
		}
		return s[:width-1] + "."
	}
	return s + strings.Repeat(" ", width-len(s))
}
