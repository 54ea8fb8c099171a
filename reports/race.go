package reports

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

// raceEvent is one timeline event with where it falls on the clock.
type raceEvent struct {
	lab.Event
	Seg    int   // clock segment: a lesson that restarts its clock starts a new one
	T      int64 // milliseconds on the segment's clock
	UntilT int64 // Until on the segment's clock, -1 for none
	// SentLater, on a completion of a message its relay had not sent
	// (KindUnsent), says the same relay sent it later in the segment.
	SentLater bool
}

// How a lease ended.
const (
	endFinalized = "finalized"  // its owner's last write
	endRanOut    = "ran out"    // the clock passed its end while its owner held it
	endTaken     = "taken over" // another worker's claim took it while it was live
	endRunEnded  = "run ended"  // the timeline ended first
)

// lease is one claim's lease, from its claim to what ended it, read from
// the typed claim, renewal and finalize events and the clock.
type lease struct {
	Owner, Subject string
	Seg            int
	Start          int    // index of the claim event (or, Revived, of the renewal)
	End            int    // index of the event that ended it (a finalize, a take-over), -1 when the clock did
	From, To       int64  // segment milliseconds
	Renewals       []int  // indexes of the renewals that extended it
	Ended          string // how it ended: endFinalized, endRanOut, endTaken or endRunEnded
	By             string // with endTaken: who took it
	// Revived says the lease began at a renewal that changed the row (1
	// row) after the lease before it on that message had ended, with no
	// claim between: the database holds a live lease again, its owner the
	// ended lease's (a renewal never changes the owner). Only a mistake
	// does this.
	Revived bool
}

// Expired says the lease ended without its owner's finalize.
func (l lease) Expired() bool { return l.Ended != endFinalized }

// race is a run's timeline as lanes: actors in order of appearance, events
// on the clock, and leases.
type race struct {
	Actors []string
	// Added is a lane the timeline did not name but the picture needs
	// (the broker, between relays and consumers), "" for none.
	Added  string
	Events []raceEvent
	Leases []lease
}

var (
	clockRE   = regexp.MustCompile(`^(.*?)\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)$`)
	logicalRE = regexp.MustCompile(`^(.*?)\s*t=(\d+)$`)
)

// clockOf splits a timeline At (or an event's Until) into a segment label
// and milliseconds on that segment's clock; ok is false for a time it
// cannot read.
func clockOf(at string) (label string, ms int64, date string, ok bool) {
	if m := clockRE.FindStringSubmatch(at); m != nil {
		t, err := time.Parse("2006-01-02T15:04:05.999Z", m[2])
		if err != nil {
			return "", 0, "", false
		}
		return m[1], t.UnixMilli(), m[2][:10], true
	}
	if m := logicalRE.FindStringSubmatch(at); m != nil {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		return m[1], n * 1000, "", true
	}
	return "", 0, "", false
}

// isConsumer says whether an actor consumes from the broker.
func isConsumer(actor string) bool {
	return strings.Contains(actor, "Consumer") || strings.Contains(actor, "Projector")
}

// newRace reads r's timeline into lanes and leases. It uses only the
// Result: reports never query a database.
func newRace(r *lab.Result) race {
	var rc race
	seen := map[string]bool{}
	seg, lastLabel, last := 0, "", int64(0)
	for i, e := range r.Timeline {
		if !seen[e.Actor] {
			seen[e.Actor] = true
			rc.Actors = append(rc.Actors, e.Actor)
		}
		label, ms, _, ok := clockOf(e.At)
		if !ok {
			ms = last
		}
		if i > 0 && (label != lastLabel || ms < last) {
			seg++
		}
		lastLabel, last = label, ms
		ev := raceEvent{Event: e, Seg: seg, T: ms, UntilT: -1}
		if _, until, _, ok := clockOf(e.Until); ok {
			ev.UntilT = until
		}
		rc.Events = append(rc.Events, ev)
	}
	rc.causesFirst()
	rc.markSentLater()
	if r.Concurrent {
		rc.sortConcurrentActors()
	}
	rc.addBroker()
	rc.leases()
	return rc
}

// causesFirst orders the events of each instant (one clock segment, one
// time) so that none is drawn above its cause, read from the offer and
// the consumer each event names: a delivery below the offer it hands on,
// a consumer's effect, dedup or ack of an offer below that offer and its
// delivery to that consumer. Events with no cause among their instant's
// keep their recorded order (their commit order), so a timeline already
// in causal order is left as it is.
func (rc *race) causesFirst() {
	evs := rc.Events
	out := make([]raceEvent, 0, len(evs))
	for start := 0; start < len(evs); {
		end := start + 1
		for end < len(evs) && evs[end].Seg == evs[start].Seg && evs[end].T == evs[start].T {
			end++
		}
		group := evs[start:end]
		placed := make([]bool, len(group))
		for range group {
			next := -1
			for i := range group {
				if placed[i] {
					continue
				}
				if next < 0 {
					next = i // the first left, should a cycle leave none ready
				}
				ready := true
				for j := range group {
					if !placed[j] && j != i && causes(group[j].Event, group[i].Event) {
						ready = false
						break
					}
				}
				if ready {
					next = i
					break
				}
			}
			placed[next] = true
			out = append(out, group[next])
		}
		start = end
	}
	rc.Events = out
}

// causes says whether c is a cause of e, from the offer each names: an
// offer causes the deliveries of it and what consumers did with it; a
// delivery causes what its consumer did with that offer.
func causes(c, e lab.Event) bool {
	if c.Offer == 0 || c.Offer != e.Offer {
		return false
	}
	consumed := e.Kind == lab.KindEffect || e.Kind == lab.KindDedup || e.Kind == lab.KindAck || e.Kind == lab.KindAckLost ||
		e.Kind == lab.KindFenced
	switch c.Kind {
	case lab.KindOffer:
		return e.Kind == lab.KindDeliver || consumed
	case lab.KindDeliver:
		return consumed && c.To == e.Actor
	}
	return false
}

// markSentLater notes, of each completion without a send, whether its
// relay sent the message after it (in the same clock segment).
func (rc *race) markSentLater() {
	for i, e := range rc.Events {
		if e.Kind != lab.KindUnsent {
			continue
		}
		for _, later := range rc.Events[i+1:] {
			if later.Seg == e.Seg && later.Kind == lab.KindOffer && later.Actor == e.Actor && later.Subject == e.Subject {
				rc.Events[i].SentLater = true
				break
			}
		}
	}
}

// sortConcurrentActors orders the lanes of a concurrent run by when each
// actor first acted and then by name, so two workers that start together
// keep their columns whichever of them recorded first.
func (rc *race) sortConcurrentActors() {
	first := map[string][2]int64{}
	for _, e := range rc.Events {
		if _, ok := first[e.Actor]; !ok {
			first[e.Actor] = [2]int64{int64(e.Seg), e.T}
		}
	}
	sort.SliceStable(rc.Actors, func(i, j int) bool {
		a, b := first[rc.Actors[i]], first[rc.Actors[j]]
		if a != b {
			return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
		}
		return strings.ToLower(rc.Actors[i]) < strings.ToLower(rc.Actors[j])
	})
}

// addBroker gives the broker a lane when relays offered to it or consumers
// took from it but the broker itself recorded nothing.
func (rc *race) addBroker() {
	for _, a := range rc.Actors {
		if a == "broker" {
			return
		}
	}
	need := false
	for _, e := range rc.Events {
		need = need || e.Kind == lab.KindOffer || (isConsumer(e.Actor) && e.Kind != lab.KindNote)
	}
	if !need {
		return
	}
	// The broker sits between the relays and the consumers.
	at := len(rc.Actors)
	for i, a := range rc.Actors {
		if isConsumer(a) {
			at = i
			break
		}
	}
	rc.Actors = append(rc.Actors[:at], append([]string{"broker"}, rc.Actors[at:]...)...)
	rc.Added = "broker"
}

// leases draws every claim's lease from the typed events and the clock: it
// starts at the claim, moves with its owner's renewals, and ends at its
// owner's finalize, at the clock passing its end, or where another
// worker's claim took it while it was live, and says which.
func (rc *race) leases() {
	open := map[int]bool{} // indexes into rc.Leases
	same := func(l lease, e raceEvent) bool {
		return l.Seg == e.Seg && (l.Subject == e.Subject || l.Subject == "" || e.Subject == "")
	}
	closeAt := func(li, idx int, t int64, how, by string) {
		l := &rc.Leases[li]
		l.End, l.To, l.Ended, l.By = idx, t, how, by
		delete(open, li)
	}
	// expire ends every open lease whose end is at or before t (a lease
	// that ends at t is over at t), and every lease of an earlier clock
	// segment.
	expire := func(seg int, t int64) {
		for li := range open {
			l := rc.Leases[li]
			switch {
			case l.Seg != seg && l.To < 0:
				closeAt(li, -1, rc.segEnd(l.Seg), endRunEnded, "")
			case l.Seg != seg || (l.To >= 0 && l.To <= t):
				closeAt(li, -1, l.To, endRanOut, "")
			}
		}
	}
	for i := range rc.Events {
		e := rc.Events[i]
		expire(e.Seg, e.T)
		switch e.Kind {
		case lab.KindClaim, lab.KindSteal:
			for li := range open {
				if same(rc.Leases[li], e) {
					closeAt(li, i, e.T, endTaken, e.Actor)
				}
			}
			rc.Leases = append(rc.Leases, lease{Owner: e.Actor, Subject: e.Subject, Seg: e.Seg, Start: i, End: -1, From: e.T, To: e.UntilT})
			open[len(rc.Leases)-1] = true
		case lab.KindRenew, lab.KindStale:
			if e.Kind == lab.KindStale && (!changed(e) || e.UntilT < 0) {
				break // a stale write that left no lease end (a late finalize) renews nothing
			}
			renewed := false
			for li := range open {
				if l := &rc.Leases[li]; l.Owner == e.Actor && same(*l, e) {
					l.Renewals = append(l.Renewals, i)
					if e.UntilT >= 0 {
						l.To = e.UntilT
					}
					renewed = true
				}
			}
			if !renewed {
				rc.revive(i, open)
			}
		case lab.KindFinalize, lab.KindNoOp, lab.KindUnsent:
			for li := range open {
				if rc.Leases[li].Owner == e.Actor && same(rc.Leases[li], e) {
					closeAt(li, i, e.T, endFinalized, "")
				}
			}
		}
	}
	for li := range open {
		l := rc.Leases[li]
		end := rc.segEnd(l.Seg)
		if l.To < 0 || l.To > end {
			closeAt(li, -1, end, endRunEnded, "")
			continue
		}
		closeAt(li, -1, l.To, endRanOut, "")
	}
}

// revive reopens the lease a renewal (event i) brought back to life: one
// that changed its row (1 row) to a lease end still ahead while no lease
// on its message was open, and the last lease on that message in the
// clock segment had ended (run out or finalized). The database then holds
// a live lease again, the ended lease's owner's, until the renewal's lease
// end; the new bar starts at the renewal. A renewal of a lease still open,
// or of a message no claim ever leased, revives nothing.
func (rc *race) revive(i int, open map[int]bool) {
	e := rc.Events[i]
	if !changed(e) || e.Subject == "" || e.UntilT <= e.T {
		return
	}
	for li := range open {
		if l := rc.Leases[li]; l.Seg == e.Seg && l.Subject == e.Subject {
			return
		}
	}
	for li := len(rc.Leases) - 1; li >= 0; li-- {
		l := rc.Leases[li]
		if l.Seg != e.Seg || l.Subject != e.Subject {
			continue
		}
		rc.Leases = append(rc.Leases, lease{Owner: l.Owner, Subject: e.Subject, Seg: e.Seg, Start: i, End: -1,
			From: e.T, To: e.UntilT, Revived: true})
		open[len(rc.Leases)-1] = true
		return
	}
}

// changed says whether an event's write changed a row.
func changed(e raceEvent) bool { return e.Rows != nil && *e.Rows > 0 }

// segEnd is the time of a segment's last event.
func (rc *race) segEnd(seg int) int64 {
	var t int64
	for _, e := range rc.Events {
		if e.Seg == seg && e.T > t {
			t = e.T
		}
	}
	return t
}
