package failpoint_test

import (
	"sync"
	"testing"

	"github.com/outboxlab/outboxlab/failpoint"
)

func TestPlanFire(t *testing.T) {
	type hit struct {
		point          failpoint.Point
		actor, subject string
		want           failpoint.Fault
	}
	tests := []struct {
		name  string
		rules []failpoint.Rule
		hits  []hit
	}{
		{name: "NilPlanInjectsNothing", hits: []hit{{failpoint.AfterClaim, "Relay-A", "e42", failpoint.None}}},
		{name: "FiresOnceByDefault",
			rules: []failpoint.Rule{{Point: failpoint.AfterSendBeforeComplete, Actor: "Relay-A", Fault: failpoint.Crash}},
			hits: []hit{
				{failpoint.AfterClaim, "Relay-A", "e42", failpoint.None},
				{failpoint.AfterSendBeforeComplete, "Relay-B", "e42", failpoint.None},
				{failpoint.AfterSendBeforeComplete, "Relay-A", "e42", failpoint.Crash},
				{failpoint.AfterSendBeforeComplete, "Relay-A", "e42", failpoint.None},
			}},
		{name: "SubjectNarrows",
			rules: []failpoint.Rule{{Point: failpoint.AfterClaim, Subject: "e2", Fault: failpoint.LeaseExpiry}},
			hits: []hit{
				{failpoint.AfterClaim, "Relay-A", "e1", failpoint.None},
				{failpoint.AfterClaim, "Relay-B", "e2", failpoint.LeaseExpiry},
				{failpoint.AfterClaim, "Relay-B", "e2", failpoint.None},
			}},
		{name: "UnreachedRuleStaysArmed",
			rules: []failpoint.Rule{{Point: failpoint.BrokerAck, Actor: "Relay-A", Fault: failpoint.AckLost}},
			hits: []hit{
				{failpoint.BrokerAck, "Relay-B", "e3", failpoint.None},
				{failpoint.BrokerAck, "Relay-A", "e3", failpoint.AckLost},
			}},
		{name: "TimesRepeats",
			rules: []failpoint.Rule{{Point: failpoint.AfterEffectBeforeAck, Fault: failpoint.AckLost, Times: 2}},
			hits: []hit{
				{failpoint.AfterEffectBeforeAck, "Consumer-1", "e20", failpoint.AckLost},
				{failpoint.AfterEffectBeforeAck, "Consumer-1", "e20", failpoint.AckLost},
				{failpoint.AfterEffectBeforeAck, "Consumer-1", "e20", failpoint.None},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p *failpoint.Plan
			if tt.rules != nil {
				p = failpoint.NewPlan(tt.rules...)
			}
			fired := 0
			for i, h := range tt.hits {
				if got := p.Fire(h.point, h.actor, h.subject); got != h.want {
					t.Fatalf("hit %d: %s, want %q", i+1, got, h.want)
				}
				if h.want != failpoint.None {
					fired++
				}
			}
			if got := len(p.Fired()); got != fired {
				t.Fatalf("recorded %d firings, want %d", got, fired)
			}
		})
	}
}

func TestPlanConcurrentFireOnce(t *testing.T) {
	p := failpoint.NewPlan(failpoint.Rule{Point: failpoint.AfterEffectBeforeAck, Fault: failpoint.Crash})
	var wg sync.WaitGroup
	var mu sync.Mutex
	crashes := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.Fire(failpoint.AfterEffectBeforeAck, "Consumer", "e5") == failpoint.Crash {
				mu.Lock()
				crashes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if crashes != 1 {
		t.Fatalf("fired %d times, want 1", crashes)
	}
}
