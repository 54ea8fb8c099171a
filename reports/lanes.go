package reports

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
)

// laneWidth is the most columns the lane view takes, so it prints anywhere.
const laneWidth = 120

// laneIntro opens every lane view's legend.
const laneIntro = "One column per actor, one row per timeline event (the # column), time running down."

// leaseBars are the lease bar's marks, in the order the legend explains
// them; laneMarkMeanings are the other marks'. The legend of a report
// lists only the marks its lanes show (see [LaneLegend]).
var (
	leaseBars = []legendEntry{
		{"+", "'+' where a claim took a free or expired lease"},
		{"|", "'|' while it is held"},
		{"=", "'=' where the owner's last write ended it"},
		{"~", "'~' (~ ran out) where the clock passed its end while its owner held it"},
		{">", "'>' (> taken) on the row where another worker's claim took it while it was live"},
	}
	laneMarkMeanings = []legendEntry{
		{"!T", "!T a claim that took a live lease or work already done (only a mistake does)"},
		{"#", "'#' a claim a live lease turned away"},
		{"D", "'D' a claim that found the work done"},
		{"?R", "?R a claim refused although the lease had ended (the claim's own fault)"},
		{"!!", "!! FENCED a write a newer fencing token turned away (the row's token had moved on: 0 rows)"},
		{"-!", "-! a write another guard turned away (0 rows), the guard named in its cell as read back from the row"},
		{"=0", "=0 the owner's write that changed 0 rows because the work was already done"},
		{"!S", "!S a write that changed a row its writer no longer owned"},
		{"REVIVES", "REVIVES a renewal that changed a lease after it had ended (only a mistake does): its bar reopens there"},
		{"//", "// an ack lost on the way"},
		{"!U", "!U a completion of a message its relay had not sent, which only a mistake does"},
		{"zz", "zz a stall"},
		{"XX", "XX a crash"},
		{"E!", "E! a statement that failed"},
	}
)

// refusalLabels are what a refused write's cell says after its verb, by
// the guard that refused it (see [lab.Refusal]); refusalMeanings explain
// each, for the legend. A token's refusal is drawn FENCED instead.
var (
	refusalLabels = map[lab.Refusal]string{
		lab.RefusedByOwner:    "REFUSED by LockedBy",
		lab.RefusedByStatus:   "REFUSED: already done",
		lab.RefusedByLease:    "REFUSED: lease ended",
		lab.RefusedByDeadline: "REFUSED: deadline",
		lab.RefusedByShorter:  "REFUSED: not later",
		lab.RefusedByReceipt:  "REFUSED: old receipt",
		lab.RefusedByGone:     "REFUSED: row gone",
		lab.RefusedByRowCount: "ROLLED BACK: >1 row",
		"":                    "REFUSED",
	}
	refusalMeanings = map[lab.Refusal]string{
		lab.RefusedByOwner:    "REFUSED by LockedBy: LockedBy named another worker",
		lab.RefusedByStatus:   "REFUSED: already done: the status guard (Status = 'Processing', delivered = 0) found the work done",
		lab.RefusedByLease:    "REFUSED: lease ended: lease_until > now found the writer's own lease over",
		lab.RefusedByDeadline: "REFUSED: deadline: the renewal would pass claimed_at + the maximum processing time",
		lab.RefusedByShorter:  "REFUSED: not later: lease_until < :proposed found the row's lease already as long",
		lab.RefusedByReceipt:  "REFUSED: old receipt: the broker's delivery was no longer in flight under the ack's receipt",
		lab.RefusedByGone:     "REFUSED: row gone: no row had the id",
		lab.RefusedByRowCount: "ROLLED BACK: >1 row: the write changed more than one row and was rolled back",
		"":                    "REFUSED: a guard the writer did not read back",
	}
)

// lostAckMeanings explain the lost acks rc's lanes show: a consumer's,
// which the broker never saw, and the broker's of a send, which its relay
// never saw.
func lostAckMeanings(rc race) []string {
	var consumer, broker bool
	for _, e := range rc.Events {
		consumer = consumer || e.Kind == lab.KindAckLost
		broker = broker || e.Kind == lab.KindOffer && e.AckLost
	}
	var out []string
	if consumer {
		out = append(out, "ack LOST: a consumer's ack the broker never saw, so the delivery stays in flight")
	}
	if broker {
		out = append(out, "send, ack LOST: the broker stored the offer, but its ack never reached the relay, which "+
			"believes the send failed")
	}
	return out
}

// unsentMeanings explain the completions without a send rc's lanes show:
// of a message its relay never sent, or sent only after.
func unsentMeanings(rc race) []string {
	var never, later bool
	for _, e := range rc.Events {
		never = never || e.Kind == lab.KindUnsent && !e.SentLater
		later = later || e.Kind == lab.KindUnsent && e.SentLater
	}
	var out []string
	if never {
		out = append(out, "COMPLETE, never sent: nor did it send it later, so the broker never had it")
	}
	if later {
		out = append(out, "COMPLETE before send: it sent it only after")
	}
	return out
}

// legendEntry is one mark and the sentence that explains it.
type legendEntry struct{ mark, meaning string }

// LaneLegend explains the marks r's lane view shows, and only those: it
// is printed above the view.
func LaneLegend(r *lab.Result) string {
	rc := newRace(r)
	if len(rc.Events) == 0 {
		return laneIntro
	}
	cols, colOf, shared := laneColumns(rc)
	cells, _ := laneCells(rc, colOf, len(cols), shared)
	shown := map[string]bool{}
	for _, row := range cells {
		for _, cell := range row {
			if f := strings.Fields(cell); len(f) > 0 {
				shown[f[0]] = true
			}
			if strings.Contains(cell, "REVIVES ") {
				shown["REVIVES"] = true
			}
		}
	}
	refused := map[lab.Refusal]bool{} // the guards the "-!" cells name
	for _, e := range rc.Events {
		if laneMark(e) == "-!" {
			refused[e.Refusal] = true
		}
	}
	legend := laneIntro
	var bars, marks []string
	for _, e := range leaseBars {
		if shown[e.mark] {
			bars = append(bars, e.meaning)
		}
	}
	for _, e := range laneMarkMeanings {
		if !shown[e.mark] {
			continue
		}
		meaning := e.meaning
		if e.mark == "!U" {
			meaning += " (" + strings.Join(unsentMeanings(rc), "; ") + ")"
		}
		if e.mark == "//" {
			meaning += " (" + strings.Join(lostAckMeanings(rc), "; ") + ")"
		}
		if e.mark == "-!" {
			var guards []string
			for _, g := range append(lab.Refusals, "") {
				if refused[g] && g != lab.RefusedByToken {
					guards = append(guards, refusalMeanings[g])
				}
			}
			meaning += " (" + strings.Join(guards, "; ") + ")"
		}
		marks = append(marks, meaning)
	}
	if len(bars) > 0 {
		legend += " A lease is a bar in its owner's column: " + strings.Join(bars, ", ") + "."
	}
	if len(marks) > 0 {
		legend += " Marks: " + strings.Join(marks, "; ") + "."
	}
	return legend
}

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
	parts := make([]string, len(rc.Events)) // a lesson part's label, printed once as a row of its own
	for i, e := range rc.Events {
		clocks[i] = shortClock(e.At, r.Timeline)
		if label, _, _, ok := clockOf(e.At); ok && label != "" {
			parts[i], clocks[i] = label, strings.TrimPrefix(clocks[i], label+" ")
		}
		if whole {
			clocks[i] = strings.Replace(clocks[i], ".000", "", 1)
		}
		clockW = max(clockW, len(clocks[i]))
		seqW = max(seqW, len(fmt.Sprint(e.Seq)))
	}
	cells, goesOn := laneCells(rc, colOf, len(cols), shared)
	// Each column is " cell |": the width left after # and Clock, shared.
	fixed := 1 + (seqW + 3) + (clockW + 3)
	cw := columnWidths(cols, cells, laneWidth-fixed)

	var b strings.Builder
	labels, key := laneLabels(cols, cw)
	if len(key) > 0 {
		for _, l := range fitLine("Columns: "+strings.Join(key, ", ")+".", "") {
			b.WriteString(l + "\n")
		}
	}
	border := "+" + strings.Repeat("-", seqW+2) + "+" + strings.Repeat("-", clockW+2) + "+"
	header := "| " + pad("#", seqW) + " | " + pad("Clock", clockW) + " |"
	for c := range cols {
		border += strings.Repeat("-", cw[c]+2) + "+"
		header += " " + pad(labels[c], cw[c]) + " |"
	}
	b.WriteString(border + "\n" + header + "\n" + border + "\n")
	for i, e := range rc.Events {
		if parts[i] != "" && (i == 0 || parts[i] != parts[i-1]) {
			b.WriteString("  -- " + parts[i] + " --\n")
		}
		// A cell too wide for its column wraps onto lines of its own below
		// the row, where a held lease's bar goes on in the other columns.
		wrapped, height := make([][]string, len(cols)), 1
		for c := range cols {
			wrapped[c] = wrapCell(cells[i][c], cw[c], goesOn[i][c])
			height = max(height, len(wrapped[c]))
		}
		for l := range height {
			line := "  " + pad("", seqW) + "   " + pad("", clockW) + "  "
			if l == 0 {
				line = "  " + pad(fmt.Sprint(e.Seq), seqW) + "   " + pad(clocks[i], clockW) + "  "
			}
			for c := range cols {
				cell := ""
				switch {
				case l < len(wrapped[c]):
					cell = wrapped[c][l]
				case goesOn[i][c]:
					cell = "|"
				}
				line += "  " + pad(cell, cw[c]) + " "
			}
			b.WriteString(strings.TrimRight(line, " ") + "\n")
		}
	}
	b.WriteString(border + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// laneLabels gives each column a label that fits its width, never cut
// mid-word: its actor's name, or, where the name is too long, the
// shortest of its abbreviations (made of the name's whole parts and
// initials) that fits and no other column uses. key names each
// abbreviation's actor, for a line above the view.
func laneLabels(cols []string, width []int) (labels, key []string) {
	used := map[string]bool{}
	for _, name := range cols {
		used[name] = true
	}
	for c, name := range cols {
		label := name
		if len(name) > width[c] {
			label = ""
			for _, cand := range abbreviations(name) {
				if len(cand) <= width[c] && !used[cand] {
					label = cand
					break
				}
			}
			if label == "" {
				label = fmt.Sprint(c + 1) // a number, explained by the key
			}
			used[label] = true
			key = append(key, label+" = "+name)
		}
		labels = append(labels, label)
	}
	return labels, key
}

// abbreviations are shorter labels for name, longest first: the initials
// of its first parts with its last part whole ("Inbox-Consumer" gives
// "I-Consumer"), then its first part whole with the initials of the rest,
// then its initials alone.
func abbreviations(name string) []string {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == ' ' || r == '(' || r == ')' || r == '_' })
	if len(parts) < 2 {
		return nil
	}
	initials := func(ps []string) string {
		var b strings.Builder
		for _, p := range ps {
			b.WriteString(p[:1])
		}
		return b.String()
	}
	last := len(parts) - 1
	return []string{
		initials(parts[:last]) + "-" + parts[last],
		parts[0] + "-" + initials(parts[1:]),
		initials(parts),
	}
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
// for none, holds the merged actors: its cells name their actor. goesOn
// says, of each cell, whether its column's lease is held on into the next
// row, so a bar runs down the lines of a row that wraps.
func laneCells(rc race, colOf map[string]int, ncols, shared int) (cells [][]string, goesOn [][]bool) {
	cells = make([][]string, len(rc.Events))
	barAt := make([][]bool, len(rc.Events))
	goesOn = make([][]bool, len(rc.Events))
	for i := range cells {
		cells[i], barAt[i], goesOn[i] = make([]string, ncols), make([]bool, ncols), make([]bool, ncols)
	}
	ends := map[[2]int]string{} // row, column: how a lease ended there
	revived := map[int]bool{}   // rows whose renewal revived an ended lease
	for _, l := range rc.Leases {
		c, ok := colOf[l.Owner]
		if !ok {
			continue
		}
		if l.Revived {
			revived[l.Start] = true
			barAt[l.Start][c] = true
		}
		last := l.Start
		for j := l.Start + 1; j < len(rc.Events); j++ {
			e := rc.Events[j]
			// A lease the run's end cut short runs to the segment's last row.
			if l.End >= 0 && j >= l.End || l.End < 0 && (e.Seg != l.Seg || l.Ended != endRunEnded && e.T >= l.To) {
				break
			}
			barAt[j][c] = true
			last = j
		}
		if l.Ended == endFinalized {
			last = l.End
		}
		for j := l.Start; j < last; j++ {
			goesOn[j][c] = true
		}
		switch {
		case l.Ended == endFinalized:
			barAt[l.End][c] = true // the owner's write ends the bar in its own row
		case l.Ended == endTaken:
			ends[[2]int{l.End, c}] = "> taken"
		case l.Ended == endRanOut && last+1 < len(rc.Events) && rc.Events[last+1].Seg == l.Seg:
			if _, marked := ends[[2]int{last + 1, c}]; !marked {
				ends[[2]int{last + 1, c}] = "~ ran out"
			}
		}
	}
	for i, e := range rc.Events {
		c := colOf[e.Actor]
		text := laneText(e, c == shared)
		if revived[i] {
			text = reviveText(e, c == shared)
		}
		mark := laneMark(e)
		switch {
		case mark != "":
		case e.Kind == lab.KindClaim:
			mark = "+"
		case e.Kind == lab.KindFinalize && barAt[i][c]:
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
				cells[i][c] = ends[[2]int{i, c}]
			case barAt[i][c]:
				cells[i][c] = "|"
			}
		}
	}
	return cells, goesOn
}

// laneMarks are the marks that make the eye find an event, by kind. A
// write a guard turned away is "!!" (FENCED) only where a fencing token
// refused it, "-!" where another guard did (see [laneMark]).
var laneMarks = map[lab.Kind]string{
	lab.KindSteal: "!T", lab.KindBlocked: "#", lab.KindDone: "D", lab.KindRefused: "?R",
	lab.KindFenced: "!!", lab.KindNoOp: "=0", lab.KindStale: "!S", lab.KindAckLost: "//", lab.KindUnsent: "!U",
	lab.KindStall: "zz", lab.KindCrash: "XX", lab.KindError: "E!",
}

// laneMark is the mark that makes the eye find an event, "" for none.
func laneMark(e raceEvent) string {
	switch {
	case e.Kind == lab.KindFenced && e.Refusal != lab.RefusedByToken:
		return "-!"
	case e.Kind == lab.KindOffer && e.AckLost:
		return "//"
	}
	return laneMarks[e.Kind]
}

// laneText is what an event's cell says: a short label by kind, naming
// the actor when the column holds several.
func laneText(e raceEvent, shared bool) string {
	verb := e.Action
	if f := strings.Fields(e.Action); len(f) > 0 {
		verb = strings.TrimRight(f[0], ":") // "re-take: ..." is a re-take, not "re-take:: 0 rows"
	}
	text := e.Action
	switch e.Kind {
	case lab.KindClaim:
		text = "claim"
	case lab.KindSteal:
		text = "claim TOOK"
	case lab.KindBlocked:
		text = "claim blocked"
	case lab.KindDone:
		text = "claim: done"
	case lab.KindRefused:
		text = "claim REFUSED"
	case lab.KindEmpty:
		text = "claim: none"
	case lab.KindRenew:
		text = "renew"
	case lab.KindFinalize, lab.KindOffer:
		text = verb
		if e.AckLost {
			text += ", ack LOST"
		}
	case lab.KindFenced:
		text = "FENCED " + verb
		if e.Refusal != lab.RefusedByToken {
			text = verb + " " + refusalLabels[e.Refusal]
		}
	case lab.KindAckLost:
		text = "ack LOST"
	case lab.KindUnsent:
		text = "COMPLETE, never sent"
		if e.SentLater {
			text = "COMPLETE before send"
		}
	case lab.KindNoOp:
		text = verb + ": 0 rows"
	case lab.KindStale:
		text = "STALE " + verb
	case lab.KindError:
		text = "ERROR " + verb
	case lab.KindCrash:
		text = "CRASH"
	case lab.KindExpiry:
		text = "expires"
	case lab.KindStall:
		text = "stall"
	case lab.KindWake:
		text = "wakes"
	}
	if e.Subject != "" && !strings.Contains(text, e.Subject) && e.Kind != lab.KindNote && e.Kind != lab.KindCommit {
		text += " " + e.Subject
	}
	if shared {
		text = e.Actor + ": " + text
	}
	return text
}

// reviveText is what a renewal's cell says when it revived an ended
// lease: that it did, whatever its kind.
func reviveText(e raceEvent, shared bool) string {
	text := "REVIVES ended lease"
	if e.Subject != "" {
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
const laneCellMax = 32

// wrapCell is a cell as the lines it takes in a column width wide: the
// whole cell where it fits, else its words wrapped, never cut, under the
// first word after its mark, and down the mark's place the lease's bar
// where it goes on (bar). Only a word too long for a line on its own is
// cut.
func wrapCell(cell string, width int, bar bool) []string {
	if len(cell) <= width {
		return []string{cell}
	}
	words := strings.Fields(cell)
	indent := ""
	if len(words) > 1 && isMark(words[0]) {
		indent = strings.Repeat(" ", len(words[0])+1)
		if bar {
			indent = "|" + indent[1:]
		}
	}
	var lines []string
	line := ""
	for _, w := range words {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = indent + w
			if len(line) > width {
				line = w // under the mark there is no room: the word keeps its whole
			}
		}
	}
	return append(lines, line)
}

// isMark says whether a cell's first word is a lane mark or a lease bar.
func isMark(w string) bool {
	if slices.Contains([]string{"+", "|", "=", "~", ">"}, w) {
		return true
	}
	for _, m := range laneMarks {
		if w == m {
			return true
		}
	}
	return w == "-!"
}

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
