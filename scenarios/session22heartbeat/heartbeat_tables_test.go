package session22heartbeat

import (
	"testing"

	"github.com/outboxlab/outboxlab/cast"
)

// TestOneDay: the renewals ledger shows times of day only when every
// renewal's clock and proposed lease end fall on one date.
func TestOneDay(t *testing.T) {
	t.Parallel()
	day := 24 * 60 * 60 * cast.TickSecond
	for _, tc := range []struct {
		name     string
		renewals []cast.RenewalEntry
		ok       bool
	}{
		{"none", nil, false},
		{"one day", []cast.RenewalEntry{{At: 0, LeaseUntil: 30 * cast.TickSecond}, {At: 60 * cast.TickSecond, LeaseUntil: 90 * cast.TickSecond}}, true},
		{"a lease past midnight", []cast.RenewalEntry{{At: 0, LeaseUntil: day}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := oneDay(tc.renewals)
			if ok != tc.ok || ok && got != cast.TickClock(0)[:10] {
				t.Errorf("oneDay = %q, %v; want %v", got, ok, tc.ok)
			}
		})
	}
}
