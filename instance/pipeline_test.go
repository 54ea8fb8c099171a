package instance

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/failpoint"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/proc"
	"github.com/outboxlab/outboxlab/store"
	"github.com/outboxlab/outboxlab/store/storetest"
)

// TestConsumerActsAtTheLabsClockAfterAHold: a consumer held before its
// effect while the lab moves its clock applies and acknowledges the
// delivery at the lab's time after the hold, in the lab's process and as a
// child process alike: the go-on at the failpoint carries the lab's clock.
// The delivery keeps the time it was taken at.
func TestConsumerActsAtTheLabsClockAfterAHold(t *testing.T) {
	t.Parallel()
	const taken, after = 1 * cast.TickSecond, 40 * cast.TickSecond
	for _, processes := range []bool{false, true} {
		t.Run(map[bool]string{false: "InProcess", true: "Processes"}[processes], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var tl lab.Timeline
			p, err := cast.NewPipeline(ctx, storetest.OpenRecorded, filepath.Join(t.TempDir(), "pipeline.db"), "", &tl, failpoint.NewPlan())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.OpenAccount(ctx, "group", "ACC-1"); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Broker().Offer(ctx, "e1", `{"account":"ACC-1","credit_cents":100}`, "test", p.Clock.Now(), 0); err != nil {
				t.Fatal(err)
			}
			o := New(Config{Processes: processes, Open: storetest.OpenRecorded, Ledger: &store.Ledger{}, Timeout: 5 * time.Second,
				Target: func(_ context.Context, path string) (proc.Target, error) {
					return proc.Target{Engine: store.SQLite, Path: path}, nil
				}})
			defer o.Stop()
			c, err := o.PipelineConsumer(ctx, p, "Consumer-1", "group", cast.InboxDesign)
			if err != nil {
				t.Fatal(err)
			}
			p.SetNow(taken)
			c.HoldBeforeEffect(func(context.Context) error { p.SetNow(after); return nil })
			if found, err := c.ConsumeNext(ctx); err != nil || !found {
				t.Fatalf("consume: found %v, %v", found, err)
			}
			if err := c.Close(ctx); err != nil {
				t.Fatal(err)
			}
			ds, err := p.Broker().Deliveries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].DeliveredAt != cast.TickClock(taken) || ds[0].AckedAt != cast.TickClock(after) {
				t.Errorf("deliveries %+v: want delivered at %s and acked at the lab's %s", ds, cast.TickClock(taken), cast.TickClock(after))
			}
			inbox, err := p.Consumers().ConsumedEvents(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != 1 || inbox[0].ConsumedAt != cast.TickClock(after) {
				t.Errorf("inbox %+v: want e1 consumed at the lab's %s", inbox, cast.TickClock(after))
			}
			for _, e := range tl.Events() {
				if (e.Kind == lab.KindEffect || e.Kind == lab.KindAck) && e.At != cast.TickClock(after) {
					t.Errorf("#%d %s %s at %s, want the lab's %s", e.Seq, e.Actor, e.Action, e.At, cast.TickClock(after))
				}
			}
		})
	}
}
