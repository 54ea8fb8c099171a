package challenge

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// Ordering is an order of the programs' requests: the lab serves one
// request at a time, and at each step lets through the instance that
// asked before (no switch) unless a Switch says to go to another. A
// begin waits while another instance's transaction is open, as SQLite's
// single writer would make it. The same ordering, with programs that ask
// the same, runs the same way again: it is what `--replay` takes.
type Ordering struct {
	Switches []Switch
}

// Switch says: at step Step, serve To's waiting request.
type Switch struct {
	Step int
	To   string
}

// String is the ordering as --replay takes it: "7:Worker-B,15:Worker-A",
// or "none" without switches.
func (o Ordering) String() string {
	if len(o.Switches) == 0 {
		return "none"
	}
	parts := make([]string, len(o.Switches))
	for i, s := range o.Switches {
		parts[i] = fmt.Sprintf("%d:%s", s.Step, s.To)
	}
	return strings.Join(parts, ",")
}

// ParseOrdering reads an ordering as [Ordering.String] writes it.
func ParseOrdering(text string) (Ordering, error) {
	var o Ordering
	if text == "none" || text == "" {
		return o, nil
	}
	for _, part := range strings.Split(text, ",") {
		step, to, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err := strconv.Atoi(step)
		if !ok || err != nil || n < 1 || to == "" {
			return Ordering{}, fmt.Errorf("an ordering is STEP:INSTANCE switches joined by commas (e.g. 7:Worker-B,15:Worker-A), not %q", part)
		}
		if len(o.Switches) > 0 && n <= o.Switches[len(o.Switches)-1].Step {
			return Ordering{}, fmt.Errorf("an ordering's steps must increase: %q", text)
		}
		o.Switches = append(o.Switches, Switch{Step: n, To: to})
	}
	return o, nil
}

// to is the instance the ordering switches to at step, if any.
func (o *Ordering) to(step int) (string, bool) {
	for _, s := range o.Switches {
		if s.Step == step {
			return s.To, true
		}
	}
	return "", false
}

// decision is a step where more than one instance could go on.
type decision struct {
	step   int
	chose  string
	others []string
}

// grant is one step of an ordering: whose request the lab let through.
type grant struct {
	step     int
	instance string
	op       string
	asked    string
	switched bool // the ordering switched to it here
}

// gate holds in's request until the ordering lets it through; false when
// the run ended meanwhile.
func (w *world) gate(in *inst, req relayproto.Request) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	in.pending, in.state = req, gated
	w.gen++
	w.cond.Broadcast()
	for in.state == gated {
		w.cond.Wait()
	}
	return in.state != gone
}

// enabledLocked lists the instances whose request may go now, in start
// order: at the gate, and not one that takes the line of transactions (see
// [takesTurn]) while another's transaction is open.
func (w *world) enabledLocked() []*inst {
	var out []*inst
	for _, in := range w.insts {
		if in.state != gated {
			continue
		}
		if takesTurn(in.pending.Op) && slices.ContainsFunc(w.insts, func(o *inst) bool { return o != in && o.open && o.state != gone }) {
			continue
		}
		out = append(out, in)
	}
	return out
}

// grantLocked lets one request through, as the ordering says; false when
// no request may go (the clock must move first).
func (w *world) grantLocked() bool {
	enabled := w.enabledLocked()
	if len(enabled) == 0 {
		return false
	}
	step := w.steps + 1
	var chosen *inst
	switched := false
	if to, ok := w.order.to(step); ok {
		i := slices.IndexFunc(enabled, func(in *inst) bool { return in.name == to })
		if i < 0 && w.diverged == "" {
			w.diverged = fmt.Sprintf("at step %d the ordering switches to %s, whose request could not go then", step, to)
		}
		if i >= 0 {
			chosen, switched = enabled[i], true
		}
	}
	if chosen == nil && slices.Contains(enabled, w.last) {
		chosen = w.last
	}
	if chosen == nil {
		chosen = enabled[0]
	}
	if len(enabled) > 1 {
		d := decision{step: step, chose: chosen.name}
		for _, in := range enabled {
			if in != chosen {
				d.others = append(d.others, in.name)
			}
		}
		w.decisions = append(w.decisions, d)
	}
	w.steps, w.last = step, chosen
	w.grants = append(w.grants, grant{step: step, instance: chosen.name, op: chosen.pending.Op, asked: asked(chosen.pending), switched: switched})
	chosen.state, chosen.step = running, step
	return true
}

// replayCommand is the command that runs this run's ordering again, with
// --db URL (its password is not the report's to show) on PostgreSQL.
func (w *world) replayCommand() string {
	c := w.ch.ReplayCommand(w.relay, w.seq.Name, *w.order)
	if w.engine == store.Postgres {
		c += " --db URL"
	}
	return c
}

// orderingTable lists the ordering's steps: whose request the lab let
// through at each, and where the ordering switched.
func (w *world) orderingTable() lab.Table {
	note := "The lab served one request at a time; at each step it let the same instance go on unless the ordering " +
		"switched (marked). `" + w.replayCommand() + "` runs this order again."
	if w.diverged != "" {
		note += " The replay could not be followed: " + w.diverged + "."
	}
	t := lab.Table{Title: "The ordering: every request, one at a time", Note: note, Columns: []string{"Step", "Instance", "Op", "Asked", "Switch"}}
	for _, g := range w.grants {
		mark := ""
		if g.switched {
			mark = "switch to " + g.instance
		}
		t.AddRow(g.step, g.instance, g.op, g.asked, mark)
	}
	return t
}

// Exploration is what [Explore] found.
type Exploration struct {
	Runs  int // sequences run
	Bound int // the most switches an ordering had
	// Complete says every ordering up to Bound switches ran; false when
	// the explorer stopped at its run limit.
	Complete bool
	// Failing is the first ordering whose run failed a check, with the
	// fewest switches and, among those, the earliest; nil when none did.
	Failing  *lab.Result
	Ordering Ordering
}

// Explore runs seq under orderings of the programs' requests, fewest
// switches first (0, then 1, ... up to bound), restarting the programs
// for each, until one fails a check or maxRuns runs have been made.
func Explore(ctx context.Context, ch *Challenge, seq Sequence, o Options, bound, maxRuns int) (Exploration, error) {
	x := Exploration{Bound: bound}
	frontier := []Ordering{{}}
	for k := 0; k <= bound && len(frontier) > 0; k++ {
		var next []Ordering
		for _, ord := range frontier {
			if x.Runs >= maxRuns {
				return x, nil
			}
			var decisions []decision
			run := o
			run.Ordering, run.decisions = &ord, &decisions
			r, err := Run(ctx, ch, seq, run)
			if err != nil {
				return x, err
			}
			x.Runs++
			if !r.Passed() {
				x.Failing, x.Ordering = r, ord
				return x, nil
			}
			last := 0
			if n := len(ord.Switches); n > 0 {
				last = ord.Switches[n-1].Step
			}
			for _, d := range decisions {
				if d.step <= last {
					continue
				}
				for _, other := range d.others {
					child := Ordering{Switches: append(slices.Clone(ord.Switches), Switch{Step: d.step, To: other})}
					next = append(next, child)
				}
			}
		}
		slices.SortStableFunc(next, func(a, b Ordering) int { return compareSteps(a, b) })
		frontier = next
	}
	x.Complete = true
	return x, nil
}

// compareSteps orders orderings by their switches' steps, earliest first.
func compareSteps(a, b Ordering) int {
	for i := range min(len(a.Switches), len(b.Switches)) {
		if c := a.Switches[i].Step - b.Switches[i].Step; c != 0 {
			return c
		}
	}
	return len(a.Switches) - len(b.Switches)
}

// ReplayArgs are the flags of challenge run that run sequence seq again
// in ordering o: --replay alone for the explored sequence.
func (ch *Challenge) ReplayArgs(seq string, o Ordering) string {
	args := "--replay " + o.String()
	if seq != ch.Explored {
		args = "--sequence " + seq + " " + args
	}
	return args
}

// ReplayCommand is the command line that runs sequence seq of ch again in
// ordering o with relay, quoted for a POSIX shell.
func (ch *Challenge) ReplayCommand(relay, seq string, o Ordering) string {
	return strings.Join(ch.ReplayParts(relay, seq, o), " ")
}

// ReplayParts are [Challenge.ReplayCommand]'s parts: the command, the
// relay flag, the ordering's flags ([Challenge.ReplayArgs]).
func (ch *Challenge) ReplayParts(relay, seq string, o Ordering) []string {
	return []string{"outboxlab challenge run " + ch.Name, "--relay " + ShellQuote(relay), ch.ReplayArgs(seq, o)}
}

// ShellQuote is s as one word of a POSIX shell: as it is when it holds
// nothing a shell reads specially, else in single quotes ('=' too: zsh
// expands a word that starts with it).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+:,./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
