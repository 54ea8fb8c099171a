package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// TestDeliveryFigures asserts sessions 18 to 20's LESSONS.md figures from
// their metrics, with the default options.
func TestDeliveryFigures(t *testing.T) {
	tests := []struct {
		scenario string
		want     map[string]float64
	}{
		{"session-18-lease-expiry-after-send", map[string]float64{"broker_offers": 2, "stale_completion_rows": 0, "published": 1,
			"inbox_credit_cents": 1000, "consumed_event_rows": 1, "naive_credit_cents": 2000}},
		{"session-19-failure-classes", map[string]float64{"rows_passed": 6}},
		{"session-20-inbox-retention", map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000,
			"broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			sc, err := Lookup(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			r := mustExecute(t, sc, "")
			for key, want := range tt.want {
				if got, ok := r.Metric(key); !ok || got != want {
					t.Errorf("%s = %v (measured %v), want %v", key, got, ok, want)
				}
			}
		})
	}
}

// TestLeaseExpiryAfterSendChecksCanFail injects a fault the lesson does not:
// Relay-B also crashes after its send, before completing. Nothing is
// published until a recovery relay comes, and the published check says so.
func TestLeaseExpiryAfterSendChecksCanFail(t *testing.T) {
	sc, _ := Lookup("session-18-lease-expiry-after-send")
	env := newTestEnv(t, sc)
	plan := failpoint.NewPlan(failpoint.Rule{Point: failpoint.AfterSendBeforeComplete, Actor: cast.RelayB, Fault: failpoint.Crash})
	r, err := playLeaseExpiryAfterSend(context.Background(), env, plan)
	if err != nil {
		t.Fatal(err)
	}
	if failed := r.FailedChecks(); !slices.Equal(failed, []string{"published"}) {
		t.Fatalf("failed checks %v, want [published]; metrics %v", failed, r.Metrics)
	}
}

// TestInboxRetentionFollowsOptions runs session 20 with other retentions
// and windows: the figures change as the lesson predicts, and the checks
// (stated in terms of the options) still pass.
func TestInboxRetentionFollowsOptions(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name string
		opts Options
		want map[string]float64
	}{
		{name: "Defaults", opts: DefaultOptions(),
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
		{name: "InboxOutlivesReplay", opts: Options{InboxRetention: 4 * day, DLQRetention: 7 * day, BrokerWindow: 2 * time.Minute},
			want: map[string]float64{"credit_short_retention_cents": 1000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 1}},
		{name: "DLQPurgedBeforeReplay", opts: Options{InboxRetention: day, DLQRetention: 2 * day, BrokerWindow: 2 * time.Minute},
			want: map[string]float64{"credit_short_retention_cents": 1000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 0}},
		{name: "WindowShorterThanResend", opts: Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 10 * time.Second},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 0, "broker_passed_after_window": 1}},
		{name: "WindowLongerThanReplay", opts: Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 4 * day},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 1, "broker_passed_after_window": 0}},
		{name: "NoWindowZeroRetention", opts: Options{InboxRetention: 0, DLQRetention: 7 * day, BrokerWindow: 0},
			want: map[string]float64{"credit_short_retention_cents": 2000, "credit_long_retention_cents": 1000, "broker_dropped_within_window": 0, "broker_passed_after_window": 1}},
	}
	sc, _ := Lookup("session-20-inbox-retention")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Execute(context.Background(), sc, "", tt.opts, false)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Passed() {
				t.Fatalf("failed checks %v", r.FailedChecks())
			}
			for key, want := range tt.want {
				if got, _ := r.Metric(key); got != want {
					t.Errorf("%s = %v, want %v", key, got, want)
				}
			}
		})
	}
}

// TestInboxRetentionVerdictFollowsMeasurements: the verdict is built from
// what each part measured, so flags that keep the lesson's breakage from
// happening say so plainly instead of repeating the lesson's text.
func TestInboxRetentionVerdictFollowsMeasurements(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name      string
		variant   string
		opts      Options
		want, not []string
	}{
		// The resend, under its own message id, passes the broker and the
		// inbox: the verdict must not call part 2's 2000 cents single.
		{name: "EventIDPerSend", variant: s20EventIDPerSend, opts: DefaultOptions(),
			want: []string{"DESIGN BROKEN", "the inbox turned it away, yet the effect is not single", "(credit 2000 cents: the 1000-cent event applied 2 times)."},
			not:  []string{"kept it single"}},
		{name: "Defaults", opts: DefaultOptions(),
			want: []string{"SAFE DESIGN held", "with an inbox retention of 24h, not longer than the dedup record's age of 3d1m30s at the replay, the record was purged and the replay was applied again (credit 2000 cents: the 1000-cent event applied 2 times)",
				"with an inbox retention of 7d1m30s, longer than the dedup record's age of 3d1m30s at the replay, the replay was deduplicated (credit 1000 cents: one effect)",
				"the broker window (2m) dropped 1 resend 30s after the first send", "the replay 3d after the dead-lettering passed the broker (1 offer) and only the inbox kept it single (credit 1000 cents: one effect)"},
			not: []string{"not reproduced"}},
		{name: "LongInboxRetention", opts: Options{InboxRetention: 30 * day, DLQRetention: 7 * day, BrokerWindow: 2 * time.Minute},
			want: []string{"only partly reproduced", "with an inbox retention of 30d, longer than the dedup record's age of 3d1m30s at the replay, the replay was deduplicated (credit 1000 cents: one effect). The short-retention breakage was not reproduced."},
			not:  []string{"SAFE DESIGN held", "applied again"}},
		{name: "ShortDLQRetention", opts: Options{InboxRetention: day, DLQRetention: 2 * day, BrokerWindow: 2 * time.Minute},
			want: []string{"only partly reproduced", "nothing was replayed, because the DLQ retention of 2d purged the message first", "the replay-passes-the-broker part was not reproduced"},
			not:  []string{"passed the broker", "only the inbox kept"}},
		{name: "ShortBrokerWindow", opts: Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 10 * time.Second},
			want: []string{"only partly reproduced", "the broker window (10s) let the resend 30s after the first send through (nothing dropped), so the within-window drop was not reproduced"}},
		{name: "LongBrokerWindow", opts: Options{InboxRetention: day, DLQRetention: 7 * day, BrokerWindow: 4 * day},
			want: []string{"only partly reproduced", "the window also dropped the replay 3d after the dead-lettering"}},
	}
	sc, _ := Lookup("session-20-inbox-retention")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Execute(context.Background(), sc, tt.variant, tt.opts, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Verdict, w) {
					t.Errorf("verdict lacks %q:\n%s", w, r.Verdict)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(r.Verdict, n) {
					t.Errorf("verdict says %q:\n%s", n, r.Verdict)
				}
			}
		})
	}
}

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
		done <- consumeBehindBarrier(ctx, newTestEnv(t, nil), p, []string{"Consumer-1", "Consumer-2"}, cast.InboxDesign)
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
				if err := consumeAll(ctx, newTestEnv(t, nil), p, "Consumer-R", cast.CreditService, cast.InboxDesign); err != nil {
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
		out, err := playRowConcurrentDuplicates(ctx, p, plan, rowDesign{credit: cast.InboxDesign, env: newTestEnv(t, nil)})
		p.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !out.ok {
			t.Fatalf("round %d: %s", i+1, out.observed)
		}
	}
}

func TestDurationText(t *testing.T) {
	tests := []struct {
		ticks int64
		want  string
	}{
		{0, "0s"}, {30 * cast.TickSecond, "30s"}, {2 * cast.TickMinute, "2m"}, {24 * cast.TickHour, "24h"},
		{3 * cast.TickDay, "3d"}, {7*cast.TickDay + 90*cast.TickSecond, "7d1m30s"}, {90 * cast.TickMinute, "1h30m"},
	}
	for _, tt := range tests {
		if got := cast.DurationText(tt.ticks); got != tt.want {
			t.Errorf("durationText(%d) = %q, want %q", tt.ticks, got, tt.want)
		}
	}
}
