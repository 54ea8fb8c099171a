package cast

import (
	"testing"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
)

// TestEventRefusal: a 0-row write is put down to a guard only where the
// statement that ran holds it, so a mistake without the token is never
// drawn FENCED by a token that moved on.
func TestEventRefusal(t *testing.T) {
	lesson := store.Stmt{SQL: "UPDATE outbox_events SET delivered = 1 WHERE event_id = :id AND claim_token = :token AND delivered = 0"}
	byID := store.Stmt{SQL: "UPDATE outbox_events SET delivered = 1 WHERE event_id = :id AND delivered = 0"}
	leased := store.Stmt{SQL: "UPDATE outbox_events SET lease_until = :to WHERE event_id = :id AND claim_token = :token AND lease_until > :now"}
	cases := []struct {
		name  string
		stmt  store.Stmt
		ev    store.Event
		found bool
		want  lab.Refusal
	}{
		{"a newer token", lesson, store.Event{Token: 2}, true, lab.RefusedByToken},
		{"gone", lesson, store.Event{}, false, lab.RefusedByGone},
		{"delivered under our token", lesson, store.Event{Token: 1, Delivered: true}, true, lab.RefusedByStatus},
		{"no token guard: the delivered flag refused it", byID, store.Event{Token: 2, Delivered: true}, true, lab.RefusedByStatus},
		{"no token guard, nothing the row explains", byID, store.Event{Token: 2}, true, ""},
		{"the lease ended", leased, store.Event{Token: 1, LeaseUntil: 100}, true, lab.RefusedByLease},
	}
	for _, c := range cases {
		if got := EventRefusal(c.stmt, c.ev, c.found, 1, 100); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
