package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/bench"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

// relayBenchAction is bench --broker: the end-to-end relay bench
// ([bench.RunRelay]), printed as one table. A lost message, a duplicate
// the design let through, or a finalization the fence refused fails it
// (exit 1).
func relayBenchAction(c *cli.Context, s *settings, broker string) error {
	if broker != "nats" && !natsURL.MatchString(broker) {
		return usagef("--broker must be nats or nats://HOST:PORT, not %q", broker)
	}
	for _, f := range []string{"claim", "retry", "river", "goqite", "checkpoint", "complete-batch", "complete-interval"} {
		if c.IsSet(f) {
			return usagef("--%s is for the claim bench; bench --broker runs the indexed claim with its batch", f)
		}
	}
	if c.String("format") != "text" {
		return usagef("bench --broker prints a text table only; --format %s is for the claim bench", c.String("format"))
	}
	cfg := bench.RelayConfig{Broker: broker, Synchronous: c.String("synchronous")}
	if cfg.Synchronous != "normal" && cfg.Synchronous != "full" {
		return usagef("--synchronous %q: want normal or full", cfg.Synchronous)
	}
	messages, err := parseIntList("messages", c.String("messages"))
	if err != nil {
		return err
	}
	batches, err := parseIntList("batch", c.String("batch"))
	if err != nil {
		return err
	}
	if cfg.Workers, err = parseIntList("workers", c.String("workers")); err != nil {
		return err
	}
	cfg.Messages, cfg.Batch = messages[0], batches[0]
	if cfg.Database, err = serverURL(c); err != nil {
		return err
	}
	out, dir, done, err := benchFolders(c, s)
	if err != nil {
		return err
	}
	defer done()
	cfg.Dir = dir
	started := s.now().UTC()
	rep, err := bench.RunRelay(c.Context, cfg)
	if err != nil {
		if c.Context.Err() != nil {
			return c.Context.Err()
		}
		return err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "outboxlab bench --broker: the relay end to end on %s, %d messages, batch %d\n", rep.Engine, cfg.Messages, cfg.Batch)
	fmt.Fprintf(&buf, "Broker: %s.\n", rep.Server)
	buf.WriteString(strings.Join(reports.Wrap("Each worker claims a batch (the indexed design, a fencing token per message), "+
		"publishes each message with its Id as Nats-Msg-Id, asynchronously, waits for every acknowledgement, then finalizes "+
		"the batch under its tokens; \"none\" is the same design without a broker. Of none's: its msgs/s over none's at the "+
		"same worker count, in this run. Dups: publishes JetStream answered as duplicates. Lost: finalized messages whose Id "+
		"the stream does not hold, read back from the stream. Resent: publishes that failed and were sent again.", reports.MaxLine), "\n") + "\n\n")
	t := lab.Table{Columns: []string{"Workers", "Broker", "Finalized", "Refused", "Drain", "msgs/s", "Of none's", "Ack ms p50/p99",
		"Dups", "Stored", "Lost", "Resent"}}
	none := map[int]float64{} // msgs/s without a broker, by worker count, measured in this run
	for _, r := range rep.Rows {
		if r.Broker == "none" {
			none[r.Workers] = r.MsgsPerS
			t.AddRow(r.Workers, r.Broker, r.Finalized, r.Refused, r.Drain.Round(1e6).String(), fmt.Sprintf("%.0f", r.MsgsPerS),
				"-", "-", "-", "-", "-", "-")
			continue
		}
		of := "-"
		if n := none[r.Workers]; n > 0 {
			of = fmt.Sprintf("%.0f%%", 100*r.MsgsPerS/n)
		}
		t.AddRow(r.Workers, r.Broker, r.Finalized, r.Refused, r.Drain.Round(1e6).String(), fmt.Sprintf("%.0f", r.MsgsPerS), of,
			fmt.Sprintf("%.2f/%.2f", r.AckP50Ms, r.AckP99Ms), r.Duplicates, r.Stored, r.Lost, r.PublishErrors)
	}
	if err := reports.WriteTable(&buf, t); err != nil {
		return err
	}
	if err := printBenchReport(c, out, "Bench-Relay-RunReport-"+started.Format("20060102T150405Z")+".txt", buf.Bytes()); err != nil {
		return err
	}
	for _, r := range rep.Rows {
		stored := r.Broker == "none" || r.Stored == int64(r.Messages)
		if r.Lost > 0 || r.Refused > 0 || r.Duplicates > 0 || r.Finalized != int64(r.Messages) || !stored {
			fmt.Fprintf(c.App.ErrWriter, "bench: %d workers, %s: %d of %d finalized, %d refused, %d duplicates, %d stored, %d lost\n",
				r.Workers, r.Broker, r.Finalized, r.Messages, r.Refused, r.Duplicates, r.Stored, r.Lost)
			return errChecksFailed
		}
	}
	return nil
}
