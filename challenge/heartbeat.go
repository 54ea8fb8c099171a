package challenge

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/relayproto"
	"github.com/outboxlab/outboxlab/store"
)

// The heartbeat relay's settings: a lease shorter than an event's work, so
// a relay must renew while it works, and a processing deadline past which
// no claim may be renewed, so an event whose work never ends is given up.
const (
	heartbeatLease    = 300 * time.Millisecond
	heartbeatWork     = 900 * time.Millisecond
	heartbeatDeadline = 1500 * time.Millisecond
	// poisonWork is the work-past-deadline sequence's E-4: twice the
	// deadline, so no claim can finish it.
	poisonWork = 2 * heartbeatDeadline
)

// HeartbeatRelay is the heartbeat relay: an event's work outlasts the
// lease, so the relay renews while it works, stops the work when a renewal
// finds the lease lost, and on SIGTERM gives back what it holds.
var HeartbeatRelay = Challenge{
	Name:   "heartbeat-relay",
	Title:  "The heartbeat relay: renew while working, stop on a lost lease or at the deadline, give back on SIGTERM",
	Lesson: "session-22-heartbeat-and-shutdown",
	Brief: "The fenced relay's six events (outbox_events, times in ticks), but each event takes work_ms of work " +
		"(op work, key = the event's id, ms a chunk of it), longer than the lease. Each instance loops: claim an " +
		"event with its token as the fenced relay does; before each chunk of work, renew the lease (lease_until = " +
		"tick + lease_ms) only WHERE claim_token is still its token, so that the lease covers the chunk; when a " +
		"renewal changes 0 rows the lease is lost: stop working on that event, send nothing, complete nothing; " +
		"after work_ms of work (an event's payload may name its own, \"work_ms\"), send the event and complete it " +
		"with the token. A claim has a processing deadline: its claim's tick plus max_processing_ms. No renewal may move " +
		"lease_until past it (bound the renewal's WHERE: tick + lease_ms <= the deadline), so an event whose work outlasts " +
		"the deadline is given up when a renewal is refused, left for another claim. On SIGTERM, give the claim back " +
		"(clear locked_by and lease_until where the token is still its own) and exit, so another instance takes " +
		"the event at once.",
	Tables: []string{"outbox_events"},
	Schema: []store.Migration{store.RelayEvents},
	Settings: map[string]any{"lease_ms": heartbeatLease.Milliseconds(), "work_ms": heartbeatWork.Milliseconds(),
		"max_processing_ms": heartbeatDeadline.Milliseconds()},
	Horizon:  time.Minute,
	Explored: "two-relays",
	Checks: append(slices.Clone(FencedRelay.Checks),
		lesson.CheckDoc{Name: "work_without_lease", About: "chunks of work an instance did on an event without a live lease of its own covering the whole chunk"},
		lesson.CheckDoc{Name: "completions_short_of_work", About: "events completed by an instance that had not done work_ms of work on them under that claim"},
		lesson.CheckDoc{Name: "claims_held_after_exit", About: "claims an instance sent SIGTERM still held, on events not delivered, when it exited"},
		lesson.CheckDoc{Name: "renewals_past_deadline", About: "claims and renewals committed that moved a claim's lease past its processing " +
			"deadline (the claim's commit, on the lab clock, plus max_processing_ms)"}),
	OnceChecks: []string{"duplicate_sends"},
	Sequences: []Sequence{
		{Name: "two-relays", About: "Relay-A and Relay-B work and relay the outbox together", Instances: []string{"Relay-A", "Relay-B"}},
		{Name: "stall-in-work", About: "the second chunk of work is held for three leases: its relay's lease is lost and another relay takes the event over; the first must stop working on it",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpWork, Nth: 2}, Do: Hold, For: 3 * heartbeatLease}}},
		{Name: "sigterm-mid-work", About: "the relay doing the second chunk of work is sent SIGTERM after it: it must give its claim back and exit",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpWork, Nth: 2}, Do: Term}}},
		{Name: "work-past-deadline", About: "E-4's work takes twice max_processing_ms: no claim can finish it, so each must be given " +
			"up at its deadline and E-4 stays undelivered, while the other events are delivered",
			Instances: []string{"Relay-A", "Relay-B"}, WorkMs: map[string]int64{"E-4": poisonWork.Milliseconds()}, Horizon: 8 * time.Second},
		{Name: "crash-mid-work", About: "the relay doing the second chunk of work is killed (SIGKILL) after it: its event is taken over once its lease ends",
			Instances: []string{"Relay-A", "Relay-B"}, AtLeastOnce: true,
			Faults: []Fault{{At: Boundary{Op: relayproto.OpWork, Nth: 2}, Do: Kill}}},
	},
	world: newHeartbeatWorld,
}

// heartbeatWorld is the fenced relay's world with a ledger of work.
type heartbeatWorld struct {
	*fencedWorld
	seq    Sequence
	mu     sync.Mutex
	chunks []workChunk
}

// workOf is an event's ms of work in the sequence.
func (hw *heartbeatWorld) workOf(event string) int64 {
	if ms, ok := hw.seq.WorkMs[event]; ok {
		return ms
	}
	return heartbeatWork.Milliseconds()
}

// unfinishable are the sequence's events whose work outlasts the
// processing deadline: no claim may finish them.
func (hw *heartbeatWorld) unfinishable() int {
	n := 0
	for _, ms := range hw.seq.WorkMs {
		if ms > heartbeatDeadline.Milliseconds() {
			n++
		}
	}
	return n
}

// workChunk is one work request: who worked on which event, from tick
// start to end, after which numbered commit.
type workChunk struct {
	instance, key string
	start, end    int64
	after         int64
}

func newHeartbeatWorld(ctx context.Context, env *lesson.Env, seq Sequence) (rules, []lab.Event, error) {
	r, seeded, err := newFencedWorld(ctx, env, seq)
	if err != nil {
		return nil, nil, err
	}
	return &heartbeatWorld{fencedWorld: r.(*fencedWorld), seq: seq}, seeded, nil
}

func (hw *heartbeatWorld) work(instance, key string, start, end, after int64) error {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	hw.chunks = append(hw.chunks, workChunk{instance: instance, key: key, start: start, end: end, after: after})
	return nil
}

func (hw *heartbeatWorld) summary(m func(string) string) string {
	return hw.fencedWorld.summary(m) + fmt.Sprintf(", %s chunks of work without a lease", m("work_without_lease"))
}

func (hw *heartbeatWorld) expected(seq Sequence) map[string]float64 {
	want := hw.fencedWorld.expected(seq)
	want["work_without_lease"], want["completions_short_of_work"], want["claims_held_after_exit"] = 0, 0, 0
	want["renewals_past_deadline"] = 0
	want["events_delivered"] -= float64(hw.unfinishable())
	want["events_not_delivered"] += float64(hw.unfinishable())
	return want
}

// judge is the fenced relay's, then the work: each chunk is judged on
// the state the audit shows after the commit it followed, each
// completion on the work its claimer did under that claim, and each
// instance the lab sent SIGTERM on what it still held when it exited.
func (hw *heartbeatWorld) judge(ctx context.Context, w *world, r *lab.Result) error {
	if err := hw.fencedWorld.judge(ctx, w, r); err != nil {
		return err
	}
	entries, err := hw.db.Audit(ctx)
	if err != nil {
		return err
	}
	hw.mu.Lock()
	chunks := slices.Clone(hw.chunks)
	hw.mu.Unlock()

	t := newFencedTracker()
	next := 0
	advance := func(tx int64) { // apply the commits numbered up to tx
		for next < len(entries) && (entries[next].Tx <= tx || entries[next].Tx == 0) {
			t.apply(entries[next])
			next++
		}
	}
	type claimKey struct {
		key   string
		token int64
	}
	worked := map[claimKey]int64{} // work done under each claim by its claimer
	without := 0
	table := lab.Table{Title: "Ledger: work", Note: "Every chunk of work the programs asked for, with the lease the audit shows its instance held " +
		"on the event when the chunk began.", Columns: []string{"Instance", "Event", "From tick", "To tick", "Holder", "Lease to", "Covered"},
		VaryingColumns: []string{"Instance", "From tick", "To tick", "Holder", "Lease to"}, Interleaved: true}
	slices.SortStableFunc(chunks, func(a, b workChunk) int { return int(a.after - b.after) })
	for _, c := range chunks {
		advance(c.after)
		covered := t.claimer[c.key] == c.instance && t.until[c.key] >= c.end
		if covered {
			worked[claimKey{c.key, t.token[c.key]}] += c.end - c.start
		} else {
			without++
		}
		table.AddRow(c.instance, c.key, c.start, c.end, cmpOr(t.claimer[c.key], "-"), t.until[c.key], yesNo(covered))
	}
	advance(1 << 62)
	short := 0
	final := newFencedTracker()
	for _, e := range entries {
		before := final.token[e.Key]
		final.apply(e)
		if e.Table == "outbox_events" && e.Op == "UPDATE" && e.OldState == "0" && e.NewState == "1" && e.NewToken == before &&
			worked[claimKey{e.Key, e.NewToken}] < hw.workOf(e.Key) {
			short++
		}
	}
	pastDeadline, deadlines := hw.deadlines(entries)
	held := 0
	events, err := store.NewRelay(hw.db, store.RelayLesson).Events(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	for _, in := range w.insts {
		if !in.termed {
			continue
		}
		exit := w.exits[in.name]
		replay := newFencedTracker()
		for _, e := range entries {
			if e.Tx != 0 && tickAt(e.At) > exit {
				break
			}
			replay.apply(e)
		}
		for _, ev := range events {
			if replay.claimer[ev.ID] == in.name && replay.until[ev.ID] > exit && !(ev.Delivered && ev.DeliveredAt <= exit) {
				held++
			}
		}
	}
	w.mu.Unlock()
	r.SetMetric("work_without_lease", float64(without))
	r.SetMetric("completions_short_of_work", float64(short))
	r.SetMetric("claims_held_after_exit", float64(held))
	r.SetMetric("renewals_past_deadline", float64(pastDeadline))
	r.Tables = append(r.Tables, table)
	if len(deadlines.Rows) > 0 {
		r.Tables = append(r.Tables, deadlines)
	}
	return nil
}

// deadlines counts the committed claims and renewals that moved a claim's
// lease past its processing deadline: the claim's commit on the lab clock
// plus max_processing_ms. That commit's tick is the tick its claimer read
// with the claim: the lab clock does not move while an instance runs, and
// no heartbeat sequence holds or loses a claim's commit reply (one that
// did would move the claimer's tick past the commit's). A claim is an
// update that takes a new token, except one by the holder of a live lease
// on the event, which keeps its claim's deadline; a renewal, one that
// moves lease_until under the same token on an event not delivered. The
// table lists each breach.
func (hw *heartbeatWorld) deadlines(entries []store.AuditEntry) (int, lab.Table) {
	table := lab.Table{Title: "Claims and renewals past the processing deadline", Note: fmt.Sprintf("Each claim or renewal that "+
		"moved a lease past its claim's tick plus max_processing_ms (%d), as the audit shows it committed.", heartbeatDeadline.Milliseconds()),
		Columns: []string{"Instance", "Event", "Token", "Claimed at tick", "Deadline", "Lease to"}}
	type claim struct {
		key   string
		token int64
	}
	claimed := map[claim]int64{}
	past := 0
	for _, e := range entries {
		if e.Table != "outbox_events" || e.Op != "UPDATE" || e.Tx == 0 {
			continue
		}
		at := tickAt(e.At)
		until, err := strconv.ParseInt(e.NewUntil, 10, 64)
		if e.NewToken != e.OldToken {
			start := at
			if oldUntil, err := strconv.ParseInt(e.OldUntil, 10, 64); err == nil && oldUntil > at && e.OldOwner == e.NewOwner {
				if held, ok := claimed[claim{e.Key, e.OldToken}]; ok {
					start = held // its holder took it again while its lease lived: the same claim
				}
			}
			claimed[claim{e.Key, e.NewToken}] = start
			if err == nil && until > start+heartbeatDeadline.Milliseconds() {
				past++
				table.AddRow(e.Actor, e.Key, e.NewToken, start, start+heartbeatDeadline.Milliseconds(), until)
			}
			continue
		}
		start, ok := claimed[claim{e.Key, e.NewToken}]
		if !ok || err != nil || e.NewState != "0" || e.NewUntil == e.OldUntil {
			continue
		}
		if deadline := start + heartbeatDeadline.Milliseconds(); until > deadline {
			past++
			table.AddRow(e.Actor, e.Key, e.NewToken, start, deadline, until)
		}
	}
	return past, table
}
