package session22heartbeat

// What session-22-heartbeat-and-shutdown's texts quote, read off the run:
// the relays cast in each role and the events each acted on, from the
// stage's ledgers (claims, renewals, sends, completions, cancellations),
// and the policy the run's relays used.

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
)

// heartbeatSettings are the policy the lesson's relays run with, as its
// texts quote it.
func heartbeatSettings(lesson.Options) map[string]string {
	return map[string]string{
		"lease":          ticksText(hbLease),
		"margin":         ticksText(heartbeatMargin),
		"beat_delay":     ticksText(hbBeatDelay),
		"renew_interval": ticksText(hbLease - heartbeatMargin + hbBeatDelay),
		"max_processing": ticksText(hbMaxProcessing),
		"grace":          ticksText(hbGrace),
		"long_work":      ticksText(hbLongWork),
		"stuck_pause":    ticksText(hbStuckPause),
	}
}

// ticksText writes a span of ticks as the lesson's texts do: "2 min", "30 s".
func ticksText(t int64) string {
	if t%cast.TickMinute == 0 {
		return fmt.Sprintf("%d min", t/cast.TickMinute)
	}
	return fmt.Sprintf("%d s", t/cast.TickSecond)
}

// onEvent is a ledger entry as the texts name it: "Relay-A's on e2".
func onEvent(relay, event string) string { return relay + "'s on " + event }

// listOrNone joins items, or says "none".
func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// castHeartbeatRoles records, from the stage's ledgers, the relays and
// events the lesson's texts name: each as a role ({@lost_lease}) when the
// texts speak of one, and each list of ledger entries as a setting the
// run recorded ({lease_lost_before_send}).
func (run *heartbeatRun) castHeartbeatRoles(r *lab.Result) {
	s := run.stage
	run.castRenewals(r, s.Renewals)
	for _, c := range s.Claims {
		if c.Event != "" {
			r.SetCast("long_worker", c.Relay) // act 1: the run's first claim
			r.SetCast("long_event", c.Event)
			break
		}
	}
	r.SetSetting("cancelled_before_send_on_loss", listOrNone(cancellations(s.Cancellations, cast.ErrLeaseLost, false)))
	r.SetSetting("cancelled_after_send_on_loss", listOrNone(cancellations(s.Cancellations, cast.ErrLeaseLost, true)))
	r.SetSetting("cancelled_on_expiry_list", listOrNone(cancellations(s.Cancellations, cast.ErrLeaseExpired, false)))
	r.SetSetting("renewals_after_delivery", listOrNone(renewalsAfterCompletion(s)))
	// The event the script pauses its holder on is the subject, not an
	// actor; its new owner is whoever the claim ledger shows took it last.
	r.SetCast("paused_event", hbPaused)
	if owner, ok := newOwner(s.Claims, hbPaused); ok {
		r.SetCast("new_owner", owner)
	}
	for _, c := range s.Claims {
		if c.Event == hbStuck {
			r.SetCast("stuck", c.Relay)
			r.SetCast("stuck_event", c.Event)
			break
		}
	}
	run.castShutdown(r)
}

// castRenewals casts the renewals' roles: the relay whose renewal found
// its event reclaimed before its send (lost_lease, lost_event), the one
// that found it so after its send (sent_event), and the first renewal
// refused for an ended lease (expired_holder, expired_event, with the
// time it ran and when that lease had ended, and the relay whose
// completion of that event committed).
func (run *heartbeatRun) castRenewals(r *lab.Result, renewals []cast.RenewalEntry) {
	var before, after, expired, deadline []string
	for _, e := range renewals {
		switch {
		case e.Rows != 0:
		case e.Reason == cast.RenewalLeaseLost && e.Sent:
			after = append(after, onEvent(e.Relay, e.Event))
			if len(after) == 1 {
				r.SetCast("sent_then_lost", e.Relay)
				r.SetCast("sent_event", e.Event)
			}
		case e.Reason == cast.RenewalLeaseLost:
			before = append(before, onEvent(e.Relay, e.Event))
			if len(before) == 1 {
				r.SetCast("lost_lease", e.Relay)
				r.SetCast("lost_event", e.Event)
			}
		case e.Reason == cast.RenewalExpired:
			expired = append(expired, onEvent(e.Relay, e.Event))
			if len(expired) == 1 {
				run.castExpired(r, e)
			}
		case e.Reason == cast.RenewalDeadline:
			deadline = append(deadline, onEvent(e.Relay, e.Event))
		case e.Reason == cast.RenewalDelivered:
			r.SetCast("done_racer", e.Relay)
			r.SetCast("done_event", e.Event)
		}
	}
	r.SetSetting("lease_lost_before_send", listOrNone(before))
	r.SetSetting("lease_lost_after_send", listOrNone(after))
	r.SetSetting("expired_renewals", listOrNone(expired))
	r.SetSetting("deadline_refused", listOrNone(deadline))
}

// castExpired casts the first renewal refused for an ended lease: its
// relay and event, when it ran, when the lease it renewed had ended (the
// latest lease its claim or an accepted renewal under the same token set
// before it), and the relay whose completion of the event committed.
func (run *heartbeatRun) castExpired(r *lab.Result, e cast.RenewalEntry) {
	s := run.stage
	r.SetCast("expired_holder", e.Relay)
	r.SetCast("expired_event", e.Event)
	r.SetSetting("expired_beat_at", cast.TickClock(e.At)[11:19])
	var ended int64 = -1
	for _, c := range s.Claims {
		if c.Relay == e.Relay && c.Event == e.Event && c.Token == e.Token && c.Seq < e.Seq {
			ended = max(ended, c.LeaseUntil)
		}
	}
	for _, p := range s.Renewals {
		if p.Relay == e.Relay && p.Event == e.Event && p.Token == e.Token && p.Rows == 1 && p.Seq < e.Seq {
			ended = max(ended, p.LeaseUntil)
		}
	}
	if ended >= 0 {
		r.SetSetting("expired_lease_end", cast.TickClock(ended)[11:19])
	}
	for _, c := range s.Completions {
		if c.Event == e.Event && c.Rows > 0 {
			r.SetCast("expired_deliverer", c.Relay)
		}
	}
}

// castShutdown casts the relay that got the stop signal (the claimer of
// the events it held at exit or marked delivered without a send), and
// records the events it claimed, those it held at exit, those it marked
// delivered without a send and those the restarted relay recovered.
func (run *heartbeatRun) castShutdown(r *lab.Result) {
	s := run.stage
	var unsent, recovered []string
	for _, c := range s.Completions {
		if c.Rows > 0 && !c.Sent {
			unsent = append(unsent, c.Event)
		}
		if c.Rows > 0 && c.Relay == hbRelayFresh && slices.Contains(run.heldAtExit, c.Event) {
			recovered = append(recovered, c.Event)
		}
	}
	r.SetSetting("completed_unsent", listOrNone(unsent))
	r.SetSetting("recovered_events", listOrNone(recovered))
	left := slices.Concat(run.heldAtExit, unsent)
	for _, c := range s.Claims {
		if c.Event != "" && slices.Contains(left, c.Event) && c.Relay != hbRelayFresh {
			r.SetCast("stopped", c.Relay)
		}
	}
	r.SetSetting("left_at_exit", listOrNone(run.heldAtExit))
	var held []string // every event the stopped relay claimed: it lives only in the shutdown act
	for _, c := range s.Claims {
		if c.Event != "" && c.Relay == r.Cast["stopped"] {
			held = append(held, c.Event)
		}
	}
	r.SetSetting("held_at_stop", listOrNone(held))
}

// cancellations lists the works cancelled with cause, after their send or
// before it.
func cancellations(all []cast.Cancellation, cause error, sent bool) []string {
	var out []string
	for _, c := range all {
		if errors.Is(c.Cause, cause) && c.Sent == sent {
			out = append(out, onEvent(c.Relay, c.Event))
		}
	}
	return out
}

// renewalsAfterCompletion lists the renewals that ran after a completion
// of their event had committed (as [cast.HeartbeatStage.RowsAfterCompletion]
// counts them).
func renewalsAfterCompletion(s *cast.HeartbeatStage) []string {
	completed := map[string]int{}
	for _, c := range s.Completions {
		if first, ok := completed[c.Event]; c.Rows > 0 && (!ok || c.Seq < first) {
			completed[c.Event] = c.Seq
		}
	}
	var out []string
	for _, e := range s.Renewals {
		if first, ok := completed[e.Event]; ok && first < e.Seq {
			out = append(out, onEvent(e.Relay, e.Event))
		}
	}
	return out
}

// newOwner is the relay that claimed event last in the claim ledger, under
// the highest token: the owner the event's lost lease passed to.
func newOwner(claims []cast.HeartbeatClaim, event string) (string, bool) {
	var owner string
	var token int64
	for _, c := range claims {
		if event != "" && c.Event == event && c.Token > token {
			owner, token = c.Relay, c.Token
		}
	}
	return owner, owner != ""
}
