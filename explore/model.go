package explore

import (
	"context"
	"fmt"
	"math/bits"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/store"
)

// This file holds the interleaving explorer's model: the action alphabet,
// the invariants, the events every ordering starts from, the designs the
// variants change, and the guards the safe design relies on.

// exploreAction is one letter of the explorer's alphabet.
type exploreAction uint8

// The alphabet. Relay-A's four actions come first and Relay-B's mirror
// them in the same order, so [exploreAction.mirror] is arithmetic.
const (
	actClaimA exploreAction = iota
	actSendA
	actCompleteA
	actCrashA
	actClaimB
	actSendB
	actCompleteB
	actCrashB
	actExpire
	actDeliver
	actConsume
	actAck
	actAckLost
	actRedeliver
	numExploreActions
)

// relayActions is how many actions each relay has.
const relayActions = actClaimB - actClaimA

// actionInfo names a letter.
type actionInfo struct {
	name  string // short, as orderings print it
	actor string
}

var exploreAlphabet = [numExploreActions]actionInfo{
	actClaimA: {"A claim", cast.RelayA}, actSendA: {"A send", cast.RelayA}, actCompleteA: {"A complete", cast.RelayA}, actCrashA: {"A crash", cast.RelayA},
	actClaimB: {"B claim", cast.RelayB}, actSendB: {"B send", cast.RelayB}, actCompleteB: {"B complete", cast.RelayB}, actCrashB: {"B crash", cast.RelayB},
	actExpire: {"expire", cast.ClockName}, actDeliver: {"deliver", "broker"}, actConsume: {"consume", exploreConsumerName},
	actAck: {"ack", exploreConsumerName}, actAckLost: {"ack lost", exploreConsumerName}, actRedeliver: {"redeliver", "broker"},
}

// describeAction says when a is enabled and what it runs under design d,
// for the alphabet table.
func describeAction(a exploreAction, d Design) (enabled, does string) {
	if i := a.relay(); i == 1 {
		return "as " + a.mirror().String() + ", for Relay-B", "as " + a.mirror().String()
	}
	switch a {
	case actClaimA:
		return "Relay-A is alive and holds nothing, and an event is claimable (not published; never leased or its lease expired)",
			fmt.Sprintf("claim next: the oldest claimable event, claim_token + 1, a %s lease", cast.DurationText(cast.RelayLease))
	case actSendA:
		if d.CompleteBeforeSend {
			return "Relay-A holds a claim it has completed and not sent (MISTAKE: complete comes first)",
				"Offer: the broker stores the event as a new offer; the relay's last step for this claim"
		}
		return "Relay-A holds a claim it has not sent", "Offer: the broker stores the event as a new offer"
	case actCompleteA:
		does := "complete under the current token: delivered = 1 only under the relay's token; 0 rows when the token is stale"
		if d.completeWithoutToken() {
			does = "complete by event id alone (MISTAKE): delivered = 1 whatever the relay's token"
		}
		if d.CompleteBeforeSend {
			return "Relay-A holds a claim it has not completed (MISTAKE: before sending it)", does
		}
		return "Relay-A holds a claim it has sent and not completed", does + "; the relay's last step for this claim"
	case actCrashA:
		return fmt.Sprintf("Relay-A holds a claim, and this ordering has had fewer relay crashes than its limit (%d)", maxExploreCrashes),
			"closes Relay-A's connection and drops its memory; it takes no further step"
	case actExpire:
		return "an unpublished event has a live lease", "moves the scenario clock to the latest live lease deadline: every live lease has expired"
	case actDeliver:
		return "the consumer holds no delivery, and the broker has an offer it never delivered to it or one ready again",
			"DeliverNext: the oldest such offer, marked in flight under a new receipt"
	case actConsume:
		credit := "e1's credit: the inbox insert and the credit in one transaction"
		if d.naiveConsumer() {
			credit = "e1's credit: an unconditional increment, no inbox (MISTAKE)"
		}
		projection := "the projection upsert, only for a newer version"
		if d.unversionedProjection() {
			projection = "the projection upsert, last write wins (MISTAKE)"
		}
		return "the consumer holds a delivery it has not applied", credit + "; then " + projection
	case actAck:
		return "the consumer has applied its delivery", "AckDelivery under the delivery's receipt; the consumer is free"
	case actAckLost:
		return "the consumer has applied its delivery", "nothing reaches the broker: the delivery stays in flight; the consumer believes it acked and is free"
	case actRedeliver:
		return "a delivery is in flight (unacknowledged, whether or not the consumer still works on it)",
			fmt.Sprintf("moves the clock past the %s visibility timeout; RedeliverUnacked makes every in-flight delivery ready again", cast.DurationText(exploreVisibility))
	}
	return "", ""
}

// String is the action's short name, as orderings print it.
func (a exploreAction) String() string { return exploreAlphabet[a].name }

// relay returns 0 for Relay-A's actions, 1 for Relay-B's, -1 otherwise.
func (a exploreAction) relay() int {
	switch {
	case a < actClaimB:
		return 0
	case a < actExpire:
		return 1
	}
	return -1
}

// mirror swaps Relay-A and Relay-B in an action.
func (a exploreAction) mirror() exploreAction {
	switch a.relay() {
	case 0:
		return a + relayActions
	case 1:
		return a - relayActions
	}
	return a
}

// orderingText prints an ordering for people.
func orderingText(actions []exploreAction) string {
	if len(actions) == 0 {
		return "(no action: the drain alone)"
	}
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = a.String()
	}
	return strings.Join(names, ", ")
}

// exploreInvariant is one property judged on every ordering.
type exploreInvariant int

const (
	invAtLeastOnce exploreInvariant = iota
	invEffectAtMostOnce
	invStaleCompletion
	invProjectionBackward
	numExploreInvariants
)

// The checks of the explorer's report: how many explored orderings broke
// each invariant.
const (
	CheckAtLeastOnce        = "violations_at_least_once"
	CheckEffectAtMostOnce   = "violations_effect_at_most_once"
	CheckStaleCompletion    = "violations_stale_completion"
	CheckProjectionBackward = "violations_projection_backward"
)

// invariantInfo names an invariant: its check (metric key) and what it says.
var invariantInfo = [numExploreInvariants]struct {
	check, name, judged string
}{
	invAtLeastOnce: {CheckAtLeastOnce, "at least once",
		"after the drain, every committed event has an accepted broker offer and is published (outbox_events.delivered = 1)"},
	invEffectAtMostOnce: {CheckEffectAtMostOnce, "effect at most once",
		"after the drain, each event's credit committed at most once for the consumer: its account holds at most one credit"},
	invStaleCompletion: {CheckStaleCompletion, "no stale completion",
		"every completion that published a row presented the row's latest claim_token, read just before it ran"},
	invProjectionBackward: {CheckProjectionBackward, "monotonic projection",
		"after every consume, the projection's version is at least the highest version it held before"},
}

// The explorer's world: two events, one consumer group.
const (
	exploreConsumerGroup    = "account-service"
	exploreConsumerName     = "Consumer"
	exploreRecoveryRelay    = "Relay-Recovery"
	exploreRecoveryConsumer = "Consumer-Recovery"
	exploreAccount          = "ACC-1"
	exploreCredit           = int64(1000)
	// exploreStep is the scenario time between two actions.
	exploreStep = cast.TickSecond
	// exploreVisibility is the broker's visibility timeout in the explorer:
	// shorter than the relay lease, so a redelivery never expires a relay
	// lease as a side effect. Lease expiry is an action of its own.
	exploreVisibility = 2 * cast.TickSecond
	// maxExploreCrashes is how many relay crashes one ordering may hold.
	maxExploreCrashes = 1
	// maxExploreBound keeps every ordering's clock short of the relay lease
	// (each action moves it at most exploreStep + exploreVisibility), so
	// only the expire action expires leases.
	maxExploreBound = int(cast.RelayLease / (exploreStep + exploreVisibility))
)

// exploreEvents are committed, in this order, before every ordering: e1
// awards a credit and puts the account at version 1; e2 freezes it at
// version 2 and awards nothing.
var exploreEvents = []struct {
	id, typ, what string
	payload       cast.Payload
}{
	{"e1", "CreditAwarded", "award 1000 cents to ACC-1; ACC-1 is active at version 1",
		cast.Payload{Account: exploreAccount, CreditCents: exploreCredit, Entity: exploreAccount, Version: 1, State: "active"}},
	{"e2", "AccountFrozen", "ACC-1 is frozen at version 2 (no credit)",
		cast.Payload{Entity: exploreAccount, Version: 2, State: "frozen"}},
}

// Design is what a variant changes: the statements the relays, the
// broker and the consumer run (the lesson's, with a variant's mistakes
// swapped in), and the relay's order of send and complete.
type Design struct {
	// SQL is the relays' and the broker's statements; the zero value is
	// the lesson's.
	SQL cast.DeliverySQL
	// Consumer is the consumer's statements; the zero value is the
	// lesson's.
	Consumer store.ConsumerSQL
	// CompleteBeforeSend marks the row published, then sends: an order,
	// not a statement.
	CompleteBeforeSend bool
}

// sql is the relays' and the broker's statements.
func (d Design) sql() cast.DeliverySQL {
	if d.SQL == (cast.DeliverySQL{}) {
		return cast.DeliveryLesson
	}
	return d.SQL
}

// consumer is the consumer's statements.
func (d Design) consumer() store.ConsumerSQL {
	if d.Consumer == (store.ConsumerSQL{}) {
		return store.ConsumerLesson
	}
	return d.Consumer
}

// completeWithoutToken says the relays complete by event id alone.
func (d Design) completeWithoutToken() bool {
	return d.sql().Relay.Complete.Name == store.CompleteByEventID.Name
}

// naiveConsumer says the consumer credits without the inbox.
func (d Design) naiveConsumer() bool { return d.consumer().Record.Omitted() }

// unversionedProjection says the projection's last write wins.
func (d Design) unversionedProjection() bool {
	return d.consumer().Project.Name == store.ProjectLastWriteWins.Name
}

// consumerDesign is the consumer's design: the lesson's statements, with
// the naive credit (no inbox insert) and the projection without a version
// guard as the variants replace them, named for the effect ledger.
func (d Design) consumerDesign() cast.ConsumerDesign {
	c := cast.ConsumerDesign{SQL: d.consumer()}
	credit, projection := "inbox credit", "versioned projection"
	if d.naiveConsumer() {
		credit = "naive credit (MISTAKE)"
	}
	if d.unversionedProjection() {
		projection = "projection without version (MISTAKE)"
	}
	c.Name = credit + " + " + projection
	return c
}

// seedExplore commits the explorer's events and opens the account.
func seedExplore(ctx context.Context, p *cast.Pipeline) error {
	if err := p.OpenAccount(ctx, exploreConsumerGroup, exploreAccount); err != nil {
		return err
	}
	for _, e := range exploreEvents {
		if err := p.Commit(ctx, e.id, e.typ, e.payload, e.what); err != nil {
			return err
		}
	}
	return nil
}

// guardSet is a set of the guards that turned a write away (0 rows).
type guardSet uint8

// The guards of the safe design, each a condition in a WHERE clause or a
// unique key.
const (
	guardCompletion guardSet = 1 << iota // claim_token = ? AND delivered = 0: a stale or repeated completion
	guardInbox                           // UNIQUE (consumer, event_id): a duplicate credit
	guardVersion                         // excluded.version > projections.version: an older version
	guardReceipt                         // delivery_count = ? AND state = 'in_flight': a late ack
)

var guardNames = []string{"completion fenced", "inbox duplicate", "older version ignored", "late ack ignored"}

// count is how many guards the set holds.
func (g guardSet) count() int { return bits.OnesCount8(uint8(g)) }

// String names the guards in the set, "none" when empty.
func (g guardSet) String() string {
	var names []string
	for i, name := range guardNames {
		if g&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
