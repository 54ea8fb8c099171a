package bench

import (
	"context"
	"testing"
)

// TestRelayBench drains a small backlog end to end through an embedded
// JetStream and without a broker: every message is finalized under its
// token, none refused, and the stream holds one message per Id, none
// lost; a relay that completes a message it never published is counted
// lost, from the stream itself.
func TestRelayBench(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		skip     func(id int64) bool
		wantLost int64
	}{
		{name: "every publish acknowledged"},
		{name: "completes what it never sent", skip: func(id int64) bool { return id%50 == 0 }, wantLost: 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := RelayConfig{Dir: t.TempDir(), Messages: 200, Workers: []int{2}, Batch: 8, Broker: "nats", skipPublish: tt.skip}
			rep, err := RunRelay(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != 2 || rep.Rows[0].Broker != "none" || rep.Rows[1].Broker != "NATS JetStream" {
				t.Fatalf("rows %+v, want none then NATS JetStream", rep.Rows)
			}
			for _, r := range rep.Rows {
				if r.Finalized != int64(cfg.Messages) || r.Refused != 0 {
					t.Errorf("%s: %d finalized, %d refused, want %d and 0", r.Broker, r.Finalized, r.Refused, cfg.Messages)
				}
			}
			js := rep.Rows[1]
			if js.Lost != tt.wantLost || js.Stored != int64(cfg.Messages)-tt.wantLost || js.Duplicates != 0 {
				t.Errorf("stored %d, lost %d, duplicates %d; want %d, %d and 0", js.Stored, js.Lost, js.Duplicates,
					int64(cfg.Messages)-tt.wantLost, tt.wantLost)
			}
		})
	}
}
