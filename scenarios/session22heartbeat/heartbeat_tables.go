package session22heartbeat

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// laneSlot is how much scenario time one character of a heartbeat lane
// stands for.
const laneSlot = 3 * cast.TickSecond

// stageTables are the stage's ledgers and the heartbeat lanes, for the report.
func stageTables(s *cast.HeartbeatStage) []lab.Table {
	claims := lab.Table{Title: "Ledger: claims (polls)", Note: "Every poll and what it claimed; a successful claim increments " +
		"claim_token and stamps claimed_at, from which the processing deadline is measured.",
		Columns: []string{"#", "Clock", "Relay", "Event", "Outcome", "Token", "Lease until"}}
	for _, c := range s.Claims {
		claims.AddRow(c.Seq, cast.TickClock(c.At), c.Relay, c.Event, c.Outcome, tokenOrDash(c.Token), clockOrDash(c.LeaseUntil))
	}
	renewals := lab.Table{Title: "Ledger: heartbeat renewals", Note: "Every renewal with the rows it changed. 0 rows is an expected " +
		"outcome with a reason: " + cast.RenewalLeaseLost + " (a newer token holds the event: another relay reclaimed it), " +
		cast.RenewalExpired + " (the token is still the relay's, but the lease had ended: lease_until > :now refused it) or " +
		cast.RenewalDeadline + " (the new lease would pass claimed_at + the maximum processing time) or " + cast.RenewalDelivered +
		" (the token is still the relay's and the event is delivered: the work is already done, not a lost lease); each " +
		"read back from the event's row after the renewal.",
		Columns: []string{"#", "Clock", "Relay", "Event", "Token", "Proposed lease until", "Rows", "Reason", "Why"}}
	// Within one day the times of day leave the Why column room to read.
	at := cast.TickClock
	if day, ok := oneDay(s.Renewals); ok {
		at = cast.ShortClock
		renewals.Note += " Clock and Proposed lease until are times of day on the scenario clock, " + day + " (UTC)."
	}
	for _, e := range s.Renewals {
		renewals.AddRow(e.Seq, at(e.At), e.Relay, e.Event, e.Token, at(e.LeaseUntil), e.Rows, e.Reason, e.Why)
	}
	sends := lab.Table{Title: "Ledger: sends", Note: "Every send to the lab's broker; the broker's own record is broker_offers.",
		Columns: []string{"#", "Clock", "Relay", "Event", "Token", "Offer"}}
	for _, e := range s.Sends {
		sends.AddRow(e.Seq, cast.TickClock(e.At), e.Relay, e.Event, e.Token, e.OfferID)
	}
	completions := lab.Table{Title: "Ledger: completions", Note: "Every completion that ran, the statement and the rows it changed, " +
		"and whether the completing relay had sent the event.",
		Columns: []string{"#", "Clock", "Relay", "Event", "Token", "Statement", "Rows", "Sent by it"}}
	for _, e := range s.Completions {
		completions.AddRow(e.Seq, cast.TickClock(e.At), e.Relay, e.Event, tokenOrDash(e.Token), e.Statement, e.Rows, e.Sent)
	}
	cancels := lab.Table{Title: "Ledger: cancellations", Note: "Every work context cancelled, its cause, and whether the send had happened.",
		Columns: []string{"#", "Clock", "Relay", "Event", "Cause", "After the send"}}
	for _, e := range s.Cancellations {
		cancels.AddRow(e.Seq, cast.TickClock(e.At), e.Relay, e.Event, e.Cause.Error(), e.Sent)
	}
	return []lab.Table{laneTable(s), claims, renewals, sends, completions, cancels}
}

// oneDay is the date every renewal's clock and proposed lease end fall
// on, if they share one.
func oneDay(renewals []cast.RenewalEntry) (string, bool) {
	day := ""
	for _, e := range renewals {
		for _, t := range []int64{e.At, e.LeaseUntil} {
			d := cast.TickClock(t)[:10]
			if day != "" && d != day {
				return "", false
			}
			day = d
		}
	}
	return day, day != ""
}

// laneTable draws one heartbeat lane per job: its lease as a bar from the
// claim, with the renewals as ticks on it.
func laneTable(s *cast.HeartbeatStage) lab.Table {
	t := lab.Table{Title: "Heartbeat lanes", Note: fmt.Sprintf("One character = %s from the claim. = lease held, C claim, "+
		"r renewal (1 row), x renewal refused (0 rows), o renewal of an event already delivered (0 rows: done), "+
		"~ the relay frozen, ! work cancelled, S send, D completed, f completion fenced out; blank: no lease.", cast.DurationText(laneSlot)),
		Columns: []string{"Relay", "Event", "Token", "Claimed", "Lane"}}
	for _, j := range s.Jobs() {
		t.AddRow(j.Relay(), j.Event, j.Token, cast.ShortClock(j.ClaimedAt), jobLane(s, j))
	}
	return t
}

// lane is one job's bar.
func jobLane(s *cast.HeartbeatStage, j *cast.HeartbeatJob) string {
	type mark struct {
		at  int64
		seq int // the timeline line: marks at one instant keep its order
		c   byte
	}
	marks := []mark{{j.ClaimedAt, 0, 'C'}}
	leaseEnd := j.LeaseUntil
	for _, e := range s.Renewals {
		if e.Relay == j.Relay() && e.Event == j.Event && e.Token == j.Token {
			c := map[bool]byte{true: 'r', false: 'x'}[e.Rows == 1]
			if e.Reason == cast.RenewalDelivered {
				c = 'o'
			}
			marks = append(marks, mark{e.At, e.Seq, c})
		}
	}
	for _, e := range s.Sends {
		if e.Relay == j.Relay() && e.Event == j.Event && e.Token == j.Token {
			marks = append(marks, mark{e.At, e.Seq, 'S'})
		}
	}
	for _, e := range s.Completions {
		if e.Relay == j.Relay() && e.Event == j.Event && e.Token == j.Token {
			marks = append(marks, mark{e.At, e.Seq, map[bool]byte{true: 'D', false: 'f'}[e.Rows == 1]})
			leaseEnd = min(leaseEnd, e.At)
		}
	}
	for _, e := range s.Cancellations {
		if e.Relay == j.Relay() && e.Event == j.Event && !errors.Is(e.Cause, cast.ErrRunOver) {
			marks = append(marks, mark{e.At, e.Seq, '!'})
		}
	}
	end := leaseEnd
	for _, m := range marks {
		end = max(end, m.at)
	}
	bar := make([]byte, (end-j.ClaimedAt)/laneSlot+1)
	for i := range bar {
		at := j.ClaimedAt + int64(i)*laneSlot
		switch {
		case j.FrozenAt(at):
			bar[i] = '~'
		case at < leaseEnd:
			bar[i] = '='
		default:
			bar[i] = ' '
		}
	}
	// Marks in time order; one that falls on a slot already marked takes
	// the next slot, so none hides another.
	sort.SliceStable(marks, func(a, b int) bool {
		return marks[a].at < marks[b].at || (marks[a].at == marks[b].at && marks[a].seq < marks[b].seq)
	})
	taken := -1
	for _, m := range marks {
		i := max(int((m.at-j.ClaimedAt)/laneSlot), taken+1)
		for i >= len(bar) {
			bar = append(bar, ' ')
		}
		bar[i], taken = m.c, i
	}
	return strings.TrimRight(string(bar), " ")
}

func tokenOrDash(t int64) any {
	if t == 0 {
		return "-"
	}
	return t
}

func clockOrDash(t int64) any {
	if t == 0 {
		return "-"
	}
	return cast.TickClock(t)
}

// staleSends counts the broker's offers made at or after the end of the
// sender's last lease on the event, from the claim and renewal ledgers.
func staleSends(s *cast.HeartbeatStage, offers []store.BrokerOffer) (int, error) {
	leaseEnd := map[[2]string]int64{}
	for _, c := range s.Claims {
		k := [2]string{c.Relay, c.Event}
		leaseEnd[k] = max(leaseEnd[k], c.LeaseUntil)
	}
	for _, e := range s.Renewals {
		if k := [2]string{e.Relay, e.Event}; e.Rows == 1 {
			leaseEnd[k] = max(leaseEnd[k], e.LeaseUntil)
		}
	}
	n := 0
	for _, o := range offers {
		at, err := cast.TickOfClock(o.OfferedAt)
		if err != nil {
			return 0, err
		}
		if at >= leaseEnd[[2]string{o.OfferedBy, o.EventID}] {
			n++
		}
	}
	return n, nil
}

// lostEvents counts the committed events no accepted broker offer carries
// when the run ends, whether or not a relay marked them delivered: no
// consumer will ever see them.
func lostEvents(events []store.Event, offers []store.BrokerOffer) int {
	offered := map[string]bool{}
	for _, o := range offers {
		if !o.Dropped {
			offered[o.EventID] = true
		}
	}
	n := 0
	for _, e := range events {
		if !offered[e.ID] {
			n++
		}
	}
	return n
}

// policyTable prints p, every relay's heartbeat policy, beside relayA's margin
// and reaction to a lost lease (which a variant may change) and the grace
// period after the stop signal.
func policyTable(p, relayA cast.HeartbeatPolicy, grace int64) lab.Table {
	t := lab.Table{Title: "Heartbeat policy", Note: "The figures every relay runs with; a variant changes Relay-A's.",
		Columns: []string{"Figure", "Value", "Meaning"}}
	passed := cast.DurationText(p.Lease-p.Margin) + " of the lease"
	if 3*(p.Lease-p.Margin) == 2*p.Lease {
		passed = "two thirds of the lease"
	}
	t.AddRow("lease", cast.DurationText(p.Lease), "what a claim or a renewal grants")
	t.AddRow("heartbeatMargin", cast.DurationText(p.Margin), "the safety margin: renew when "+passed+" has passed")
	t.AddRow("Relay-A's margin", cast.DurationText(relayA.Margin), "Relay-A renews when this much of its lease is left")
	t.AddRow("beat delay", cast.DurationText(p.Delay), "every beat fires this late")
	t.AddRow("max processing", cast.DurationText(p.MaxProcessing), "no lease past claimed_at + this")
	t.AddRow("grace period", cast.DurationText(grace), "after SIGTERM, for work already sent")
	t.AddRow("Relay-A on lease loss", string(relayA.OnLeaseLost), "what its heartbeat does with a 0-row renewal")
	return t
}

// renewalTally counts the renewal ledger's entries by outcome.
type renewalTally struct {
	OneRow int
	// LeaseLostBeforeSend and LeaseLostAfterSend are the 0-row renewals
	// of a lease another relay reclaimed, by whether the job had sent its
	// event.
	LeaseLostBeforeSend, LeaseLostAfterSend int
	Expired                                 int // 0 rows: the lease had ended, the token still the relay's
	Deadline                                int // 0 rows: the processing deadline
	Delivered                               int // 0 rows: delivered under the relay's own token, already done
}

// tallyRenewals counts the stage's renewals by outcome.
func tallyRenewals(s *cast.HeartbeatStage) renewalTally {
	var t renewalTally
	for _, e := range s.Renewals {
		switch {
		case e.Rows == 1:
			t.OneRow++
		case e.Reason == cast.RenewalLeaseLost && e.Sent:
			t.LeaseLostAfterSend++
		case e.Reason == cast.RenewalLeaseLost:
			t.LeaseLostBeforeSend++
		case e.Reason == cast.RenewalExpired:
			t.Expired++
		case e.Reason == cast.RenewalDeadline:
			t.Deadline++
		case e.Reason == cast.RenewalDelivered:
			t.Delivered++
		}
	}
	return t
}

// cancelled counts the works cancelled with cause (e.g. cast.ErrLeaseLost, a
// renewal that found the event reclaimed), by whether the send had
// happened.
func cancelled(s *cast.HeartbeatStage, cause error) (beforeSend, afterSend int) {
	for _, c := range s.Cancellations {
		switch {
		case !errors.Is(c.Cause, cause):
		case c.Sent:
			afterSend++
		default:
			beforeSend++
		}
	}
	return beforeSend, afterSend
}

// renewalsToDeadline are the renewals of event whose proposed lease ends
// exactly at its claim's claimed_at + maxProcessing, whatever rows they
// changed.
func renewalsToDeadline(s *cast.HeartbeatStage, event string, maxProcessing int64) []cast.RenewalEntry {
	claimedAt := map[[3]any]int64{}
	for _, c := range s.Claims {
		claimedAt[[3]any{c.Relay, c.Event, c.Token}] = c.At
	}
	var out []cast.RenewalEntry
	for _, e := range s.Renewals {
		at, ok := claimedAt[[3]any{e.Relay, e.Event, e.Token}]
		if ok && e.Event == event && e.LeaseUntil == at+maxProcessing {
			out = append(out, e)
		}
	}
	return out
}

// rowsAfterCompletion sums the rows changed by the renewals that ran
// after a completion of their event had committed (a completion's
// timeline line before the renewal's), and counts those renewals.
func rowsAfterCompletion(s *cast.HeartbeatStage) (rows int64, renewals int) {
	completed := map[string]int{} // event: the line of its first committed completion
	for _, c := range s.Completions {
		if first, ok := completed[c.Event]; c.Rows > 0 && (!ok || c.Seq < first) {
			completed[c.Event] = c.Seq
		}
	}
	for _, e := range s.Renewals {
		if first, ok := completed[e.Event]; ok && first < e.Seq {
			rows += e.Rows
			renewals++
		}
	}
	return rows, renewals
}

// acceptedOffers counts the broker's accepted offers of event.
func acceptedOffers(offers []store.BrokerOffer, event string) int {
	n := 0
	for _, o := range offers {
		if o.EventID == event && !o.Dropped {
			n++
		}
	}
	return n
}

// completedOnceBy counts every committed completion of event, and returns
// it with the figure a check compares: 1 only when there was exactly one,
// by relay; 0 when the only one was another relay's; the count when there
// were several.
func completedOnceBy(completions []cast.HeartbeatCompletion, event, relay string) (committed, once int) {
	byRelay := 0
	for _, c := range completions {
		if c.Rows == 0 || c.Event != event {
			continue
		}
		committed++
		if c.Relay == relay {
			byRelay++
		}
	}
	if committed == 1 {
		return committed, byRelay
	}
	return committed, committed
}
