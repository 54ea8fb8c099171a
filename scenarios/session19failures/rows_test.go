package session19failures

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// TestConsumeBehindBarrierSurvivesAFailingConsumer: when one consumer fails
// after taking its delivery and before the barrier, the other is not left
// waiting for it: the call returns the failure instead of hanging.
func TestConsumeBehindBarrierSurvivesAFailingConsumer(t *testing.T) {
	ctx := context.Background()
	var tl lab.Timeline
	p, err := cast.NewPipeline(ctx, storetest.OpenRecorded, filepath.Join(t.TempDir(), "row5.db"), "row 5", &tl, failpoint.NewPlan())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.OpenAccount(ctx, cast.CreditService, "ACC-5"); err != nil {
		t.Fatal(err)
	}
	// Two offers: one a consumer can apply, one it fails on before its effect.
	for _, o := range []struct{ id, payload string }{{"e5", `{"account":"ACC-5","credit_cents":1000}`}, {"e5-bad", "not json"}} {
		if _, err := p.Broker().Offer(ctx, o.id, o.payload, cast.RelayA, p.Clock.Now(), 0); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		done <- consumeBehindBarrier(ctx, lessontest.NewEnv(t, nil), p, []string{"Consumer-1", "Consumer-2"}, cast.InboxDesign)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a consumer failed on the bad offer, yet no error was returned")
		}
	case <-time.After(30 * time.Second): // a safety limit only: the call returns at once
		t.Fatal("the other consumer was left waiting at the barrier")
	}
}

// TestCrashAtEveryFailpointLosesNoEvent crashes a relay or a consumer at
// each named point, on each of three committed events in turn. After
// recovery (the leases expire, a fresh relay drains the outbox, a restarted
// consumer takes the redeliveries) every committed event has been offered
// and published, and each credit was applied exactly once.
func TestCrashAtEveryFailpointLosesNoEvent(t *testing.T) {
	events := []string{"c1", "c2", "c3"}
	points := append(slices.Clone(failpoint.RelayPoints), failpoint.ConsumerPoints...)
	for _, point := range points {
		for _, victim := range events {
			t.Run(fmt.Sprintf("%s/%s", point, victim), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				plan := failpoint.NewPlan(failpoint.Rule{Point: point, Subject: victim, Fault: failpoint.Crash})
				var tl lab.Timeline
				p, err := cast.NewPipeline(ctx, storetest.OpenRecorded, filepath.Join(t.TempDir(), "crash.db"), "", &tl, plan)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				for _, e := range events {
					if err := setupCredit(ctx, p, e, "ACC-"+e); err != nil {
						t.Fatal(err)
					}
				}
				p.SetNow(cast.TickSecond)
				workUntilCrash(t, ctx, p)

				// Recovery.
				if err := p.DrainRelays(ctx, "Relay-R"); err != nil {
					t.Fatal(err)
				}
				if err := consumeAll(ctx, lessontest.NewEnv(t, nil), p, "Consumer-R", cast.CreditService, cast.InboxDesign); err != nil {
					t.Fatal(err)
				}
				if fired := plan.Fired(); len(fired) != 1 || fired[0].Fault != failpoint.Crash {
					t.Fatalf("the crash did not happen: %v", fired)
				}
				checkEveryEventOnce(t, ctx, p, events)
			})
		}
	}
}

// workUntilCrash has a first relay, then a first consumer, work until they
// have nothing left or die.
func workUntilCrash(t *testing.T, ctx context.Context, p *cast.Pipeline) {
	t.Helper()
	a, err := p.StartRelay(ctx, cast.RelayA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	for {
		claimed, err := a.RunOnce(ctx)
		if cast.IsCrash(err) || !claimed {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := p.StartConsumer(ctx, "Consumer-1", cast.CreditService, cast.InboxDesign)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for {
		found, err := c.ConsumeNext(ctx)
		if cast.IsCrash(err) || !found {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkEveryEventOnce asserts that every event was offered and published,
// and its credit applied exactly once.
func checkEveryEventOnce(t *testing.T, ctx context.Context, p *cast.Pipeline, events []string) {
	t.Helper()
	for _, e := range events {
		offered, err := p.Count(ctx, store.CountOffers.SQL, e, 0)
		if err != nil {
			t.Fatal(err)
		}
		ev, ok, err := store.NewRelay(p.Audit, store.RelayLesson).EventByID(ctx, e)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		credit, err := p.Count(ctx, store.AccountCredit.SQL, cast.AccountID(cast.CreditService, "ACC-"+e))
		if err != nil {
			t.Fatal(err)
		}
		if offered < 1 || !ev.Delivered || credit != rowCredit {
			t.Errorf("%s: offered %d times, published %v, credit %d; want offered, published, credit %d", e, offered, ev.Delivered, credit, rowCredit)
		}
	}
	if rows, _ := p.Count(ctx, store.CountConsumedEvents.SQL, cast.CreditService); rows != int64(len(events)) {
		t.Errorf("consumed_events rows %d, want %d", rows, len(events))
	}
}

// TestConcurrentDuplicatesRowAlwaysOnce plays session 19's row 5 (two
// consumer connections released into the same event by a barrier) many
// times: with the inbox the effect is applied exactly once every time.
func TestConcurrentDuplicatesRowAlwaysOnce(t *testing.T) {
	t.Parallel()
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for i := range rounds {
		ctx := context.Background()
		var tl lab.Timeline
		plan := failpoint.NewPlan()
		p, err := cast.NewPipeline(ctx, storetest.OpenRecorded, filepath.Join(t.TempDir(), fmt.Sprintf("row5-%d.db", i)), "row 5", &tl, plan)
		if err != nil {
			t.Fatal(err)
		}
		out, err := playRowConcurrentDuplicates(ctx, p, plan, rowDesign{credit: cast.InboxDesign, env: lessontest.NewEnv(t, nil)})
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !out.ok {
			t.Fatalf("round %d: %s", i+1, out.observed)
		}
	}
}
