package scenarios

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// offerWithEndlessWindow is a broker offer no variant runs: it drops every
// send of an event id the broker ever accepted, whatever its age, as if the
// dedup window never ended. The three-day replay is then dropped too.
var offerWithEndlessWindow = store.Stmt{Name: "test: offer dropped whenever the event id was ever accepted (an endless window)", SQL: `INSERT INTO broker_offers (event_id, payload, offered_by, offered_at, dropped)
VALUES (:event_id, :payload, :offered_by, :now,
        EXISTS (SELECT 1 FROM broker_offers
                WHERE event_id = :event_id
                  AND dropped = 0))
RETURNING offer_id, dropped`}

func init() {
	checkBreakers = append(checkBreakers,
		checkBreaker{"session-20-inbox-retention", offerWithEndlessWindow.Name,
			swapOf(func(s cast.DeliverySQL) cast.DeliverySQL { s.Broker.Offer = offerWithEndlessWindow; return s }),
			// Part 1's replay is dropped as well: its inbox is never put to the test.
			[]string{"broker_passed_after_window", "credit_short_retention_cents"}})
}

// TestInboxRetentionEffectsNameTheirService: part 1 short's two credits of
// e20 come from two instances of one consumer service, and each effect
// says which service it is for (where its instance learned it, not from
// its words), so the page's per-message view can count them as one
// service's double effect.
func TestInboxRetentionEffectsNameTheirService(t *testing.T) {
	t.Parallel()
	r := mustExecute(t, &inboxRetention, "")
	actors := map[string]bool{}
	for _, e := range r.Timeline {
		if e.Kind != lab.KindEffect && e.Kind != lab.KindDedup {
			continue
		}
		if e.Service != cast.CreditService {
			t.Errorf("#%d %s's %s of %s is for service %q, want %q", e.Seq, e.Actor, e.Kind, e.Subject, e.Service, cast.CreditService)
		}
		if e.Kind == lab.KindEffect && e.Subject == "e20" && strings.HasPrefix(e.At, "part 1 short") {
			actors[e.Actor] = true
		}
	}
	if len(actors) != 2 {
		t.Errorf("part 1 short: e20 credited by %v, want two instances", actors)
	}
}
