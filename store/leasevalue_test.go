package store

import (
	"database/sql"
	"reflect"
	"testing"
	"time"
)

// TestLeaseBindsItsTablesTime: a lease binds its end on its table's own
// convention, UTC text with milliseconds on the payments outbox and ticks
// on outbox_events, as a claim's :until and a renewal's :proposed.
func TestLeaseBindsItsTablesTime(t *testing.T) {
	at := time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		got  []any
		want []any
	}{
		{"outbox claim", OutboxLeaseFor("Worker-A", at, 30*time.Second).claimArgs("worker"),
			[]any{sql.Named("worker", "Worker-A"), sql.Named("until", "2026-01-15T09:00:30.000Z")}},
		{"event claim", EventLeaseFor("Relay-A", 100, 30_000).claimArgs("relay"),
			[]any{sql.Named("relay", "Relay-A"), sql.Named("until", int64(30_100))}},
		{"event renewal", EventLease{Token: 2, Until: 45_000}.renewalArgs(),
			[]any{sql.Named("token", int64(2)), sql.Named("proposed", int64(45_000))}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: binds %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
