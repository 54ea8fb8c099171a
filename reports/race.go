package reports

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/outboxlab/outboxlab/lab"
)

// zeroRows finds "0 rows" as a count of its own, not the end of "10 rows".
var zeroRows = regexp.MustCompile(`(^|[^0-9])0 rows`)

// The kinds of event the lane view and the HTML timeline draw. A lesson may
// set lab.Event.Kind; otherwise [EventKind] infers it from Action and Detail.
const (
	KindClaim    = "claim"    // a claim that took a lease
	KindBlocked  = "blocked"  // a claim turned away by a live lease
	KindRefused  = "refused"  // a claim that did not take a message whose lease had ended: the claim's own fault
	KindRenew    = "renew"    // a renewal or heartbeat that extended a lease
	KindFinalize = "finalize" // the owner's last write: finalize, complete, ack
	KindExpiry   = "expiry"   // the clock ran a lease out
	KindCrash    = "crash"    // an actor died
	KindFenced   = "fenced"   // a write a guard turned away: 0 rows
	KindRejected = "rejected" // a finalize the owner guard rejected
	KindOffer    = "offer"    // a relay's send: the broker stored an offer
	KindDeliver  = "deliver"  // the broker handed an offer to a consumer
	KindEffect   = "effect"   // a consumer's effect on its own data
	KindDedup    = "dedup"    // a consumer's guard found a duplicate: no effect
	KindAck      = "ack"      // a consumer's ack to the broker
	KindCommit   = "commit"   // a producer committed business data and its outbox row
	KindNote     = "note"     // anything else
)

// EventKind is e.Kind, or the kind its Action and Detail describe.
func EventKind(e lab.Event) string {
	if e.Kind != "" {
		return e.Kind
	}
	a, d := strings.ToLower(e.Action), strings.ToLower(e.Detail)
	consumer := isConsumer(e.Actor)
	zero := zeroRows.MatchString(d) && !strings.Contains(d, "1 row")
	switch {
	case strings.Contains(a, "crash"):
		return KindCrash
	case e.Actor == "clock":
		if strings.Contains(a, "expir") || strings.Contains(d, "expired") {
			return KindExpiry
		}
		return KindNote
	case strings.Contains(a, "rejected"):
		return KindRejected
	case strings.HasPrefix(a, "claim"):
		switch {
		case strings.Contains(a, "blocked") || strings.Contains(d, "live"):
			return KindBlocked // turned away by a live lease, as it should be
		case strings.Contains(a, "refused") || strings.HasPrefix(d, "refused"):
			return KindRefused
		case strings.Contains(a, "empty") || strings.Contains(a, "done") || strings.Contains(d, "nothing claimable"):
			return KindNote
		}
		return KindClaim
	case strings.HasPrefix(a, "renew") || strings.HasPrefix(a, "heartbeat"):
		if strings.Contains(a, "refused") || strings.HasPrefix(d, "refused") || zero {
			return KindFenced
		}
		return KindRenew
	case consumer && (a == "effect" || a == "project" || a == "inbox insert"):
		if zero {
			return KindDedup
		}
		return KindEffect
	case consumer && a == "no effect":
		return KindDedup
	case consumer && a == "ack":
		return KindAck
	case strings.Contains(a, "finalize") || strings.HasPrefix(a, "complete") || strings.HasPrefix(a, "ack") || strings.HasPrefix(a, "marks complete"):
		if strings.Contains(d, "fenced") || strings.Contains(a, "lease-lost") || strings.Contains(a, "failed") || zero {
			return KindFenced
		}
		return KindFinalize
	case strings.HasPrefix(a, "send") && !strings.Contains(a, "skipped"):
		return KindOffer
	case e.Actor == "broker" && strings.HasPrefix(a, "deliver"):
		return KindDeliver
	case strings.HasPrefix(a, "commit") || strings.HasPrefix(a, "create payment") || strings.HasPrefix(a, "insert event"):
		return KindCommit
	}
	return KindNote
}

// isConsumer says whether an actor consumes from the broker.
func isConsumer(actor string) bool {
	return strings.Contains(actor, "Consumer") || strings.Contains(actor, "Projector")
}

// raceEvent is one timeline event with what the pictures need.
type raceEvent struct {
	lab.Event
	Kind    string
	Subject string // the message or event it is about, "" when none is named
	Rows    int    // rows the event says it changed, -1 when it does not say
	Seg     int    // clock segment: a lesson that restarts its clock starts a new one
	T       int64  // milliseconds on the segment's clock
	Until   int64  // for claims and renewals: the lease deadline, -1 unknown
	Offer   string // for offers and deliveries: the broker's offer number
	To      string // for deliveries: the consumer
	Stale   bool   // a write that succeeded after its writer's lease had ended
}

// lease is one claim's lease, from its claim to its finalize or expiry.
type lease struct {
	Owner, Subject string
	Seg            int
	Start          int   // index of the claim event
	End            int   // index of the event that ended it, -1 when it ran out
	From, To       int64 // segment milliseconds
	Renewals       []int // indexes of the renewals that extended it
	Expired        bool  // it ran out rather than being finalized
}

// race is a run's timeline as lanes: actors in order of appearance, events
// with their kinds, and leases.
type race struct {
	Actors []string
	// Added is a lane the timeline did not name but the picture needs
	// (the broker, between relays and consumers), "" for none.
	Added  string
	Events []raceEvent
	Leases []lease
}

var (
	subjectRE = regexp.MustCompile(`\b(PAY-\d+|EVENT-\d+|E-\d+|e\d+(?:-v\d+)?)\b`)
	rowsRE    = regexp.MustCompile(`\b(\d+) rows?\b`)
	untilRE   = regexp.MustCompile(`(?:lease until|renews to|lease ends at|left to expire at) (\d{4}-\d\d-\d\dT[\d:.]+Z|\d\d:\d\d:\d\d(?:\.\d+)?|\d+)`)
	offerRE   = regexp.MustCompile(`\boffer (\d+)`)
	toRE      = regexp.MustCompile(`\bto ([A-Z][\w-]*(?: \(restarted\))?)`)
	clockRE   = regexp.MustCompile(`^(.*?)\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)$`)
	logicalRE = regexp.MustCompile(`^(.*?)\s*t=(\d+)$`)
)

// clockOf splits a timeline At into a segment label and milliseconds on
// that segment's clock; ok is false for a time it cannot read.
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

// deadline reads a lease deadline written in a detail: a full timestamp, a
// time of day on the event's date, or a logical time.
func deadline(text, date string) int64 {
	m := untilRE.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v := m[1]
	switch {
	case strings.Contains(v, "T"):
		if t, err := time.Parse("2006-01-02T15:04:05.999Z", v); err == nil {
			return t.UnixMilli()
		}
	case strings.Contains(v, ":") && date != "":
		if t, err := time.Parse("2006-01-02T15:04:05.999Z", date+"T"+v+"Z"); err == nil {
			return t.UnixMilli()
		}
	case !strings.Contains(v, ":"):
		n, _ := strconv.ParseInt(v, 10, 64)
		return n * 1000
	}
	return -1
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
		label, ms, date, ok := clockOf(e.At)
		if !ok {
			ms = last
		}
		if i > 0 && (label != lastLabel || ms < last) {
			seg++
		}
		lastLabel, last = label, ms
		ev := raceEvent{Event: e, Kind: EventKind(e), Seg: seg, T: ms, Rows: -1, Until: -1}
		if m := subjectRE.FindStringSubmatch(e.Action + " " + e.Detail); m != nil {
			ev.Subject = m[1]
		}
		if m := rowsRE.FindStringSubmatch(e.Detail); m != nil {
			ev.Rows, _ = strconv.Atoi(m[1])
		}
		if ev.Kind == KindClaim || ev.Kind == KindRenew {
			ev.Until = deadline(e.Action+" "+e.Detail, date)
		}
		if m := offerRE.FindStringSubmatch(e.Detail); m != nil && (ev.Kind == KindOffer || ev.Kind == KindDeliver) {
			ev.Offer = m[1]
		}
		if ev.Kind == KindDeliver {
			if m := toRE.FindStringSubmatch(e.Detail); m != nil {
				ev.To = m[1]
			}
		}
		rc.Events = append(rc.Events, ev)
	}
	if r.Concurrent {
		rc.sortConcurrentActors()
	}
	rc.addBroker()
	rc.leases()
	return rc
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
		need = need || e.Kind == KindOffer || (isConsumer(e.Actor) && e.Kind != KindNote)
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

// leases pairs every claim with the event that ended its lease: the
// owner's finalize, a later claim of the same subject, or its deadline.
func (rc *race) leases() {
	open := map[int]bool{} // indexes into rc.Leases
	same := func(l lease, e raceEvent) bool {
		return l.Seg == e.Seg && (l.Subject == e.Subject || l.Subject == "" || e.Subject == "")
	}
	closeAt := func(li int, idx int, t int64, expired bool) {
		l := &rc.Leases[li]
		l.End, l.To, l.Expired = idx, t, expired
		delete(open, li)
	}
	// expire ends every open lease whose deadline is at or before t (a
	// lease that ends at t is over at t), and every lease of an earlier
	// clock segment.
	expire := func(seg int, t int64) {
		for li := range open {
			l := rc.Leases[li]
			switch {
			case l.Seg != seg && l.To < 0:
				closeAt(li, -1, rc.segEnd(l.Seg), true)
			case l.Seg != seg || (l.To >= 0 && l.To <= t):
				closeAt(li, -1, l.To, true)
			}
		}
	}
	for i := range rc.Events {
		e := &rc.Events[i]
		expire(e.Seg, e.T)
		switch e.Kind {
		case KindClaim:
			for li := range open {
				if same(rc.Leases[li], *e) && rc.Leases[li].Owner != e.Actor {
					closeAt(li, -1, min(rc.Leases[li].To, e.T), true)
				}
			}
			to := e.Until
			if to < e.T {
				to = -1
			}
			rc.Leases = append(rc.Leases, lease{Owner: e.Actor, Subject: e.Subject, Seg: e.Seg, Start: i, End: -1, From: e.T, To: to})
			open[len(rc.Leases)-1] = true
		case KindRenew:
			for li := range open {
				if rc.Leases[li].Owner == e.Actor && same(rc.Leases[li], *e) {
					rc.Leases[li].Renewals = append(rc.Leases[li].Renewals, i)
					if e.Until > rc.Leases[li].To {
						rc.Leases[li].To = e.Until
					}
				}
			}
		case KindFinalize:
			held := false
			for li := range open {
				if rc.Leases[li].Owner == e.Actor && same(rc.Leases[li], *e) {
					closeAt(li, i, e.T, false)
					held = true
				}
			}
			// A finalize by an actor whose lease on it already ended.
			if !held {
				for _, l := range rc.Leases {
					if l.Owner == e.Actor && l.Seg == e.Seg && l.Subject == e.Subject && l.Expired && l.To <= e.T {
						e.Stale = true
					}
				}
			}
		}
	}
	for li := range open {
		l := rc.Leases[li]
		if l.To < 0 {
			l.To = rc.segEnd(l.Seg)
		}
		closeAt(li, -1, l.To, true)
	}
}

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
