package lesson

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
)

// jetStream is a run's real broker: the embedded NATS server it started
// (nil with a nats:// URL), and the broker of each part that asked.
type jetStream struct {
	server  *natsbroker.Server
	url     string
	where   string // what a report says the broker was
	brokers []*natsbroker.Broker
}

// UseRealBroker gives pipeline p of the run's part named part the real
// broker [Options.Broker] names, in place of the lab's: streams of its
// own on an embedded NATS JetStream, which the first part to ask starts
// with its file storage in the run's folder, or on the server a nats://
// URL names (the streams are removed after the run). cfg is the part's
// window, visibility and deliveries. Without a real broker named it does
// nothing. The run stops the server and removes the streams at its end.
func (e *Env) UseRealBroker(ctx context.Context, p *cast.Pipeline, part string, cfg natsbroker.Config) error {
	kind := e.Options.Broker
	if kind == "" || kind == "lab" {
		return nil
	}
	if e.broker == nil {
		js := &jetStream{url: kind, where: "the NATS JetStream server at " + natsbroker.Redacted(kind) + " (the run's streams removed after it)"}
		if kind == "nats" {
			srv, err := natsbroker.Start(filepath.Join(e.Dir, "jetstream"))
			if err != nil {
				return fmt.Errorf("start the embedded NATS server: %w", err)
			}
			js.server, js.url = srv, srv.URL()
			js.where = "an embedded NATS JetStream server (nats-server " + natsbroker.ServerVersion + ", file storage in the run's folder)"
		}
		e.broker = js
	}
	cfg.RunID = runID(filepath.Base(e.Dir) + "_" + part)
	b, err := natsbroker.Dial(ctx, e.broker.url, cfg)
	if err != nil {
		return fmt.Errorf("--broker %s: %w", natsbroker.Redacted(kind), err)
	}
	e.broker.brokers = append(e.broker.brokers, b)
	p.UseJetStream(b, e.broker.where)
	return nil
}

// runID is s as a NATS stream name's part: letters, digits, '-' and '_'.
func runID(s string) string { return strings.Trim(notInRunID.ReplaceAllString(s, "_"), "_") }

var notInRunID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// stopRealBroker closes the run's brokers, removes their streams from a
// server the run did not start, and stops the one it did; what fails
// goes to warn.
func (e *Env) stopRealBroker(warn func(error)) {
	if e.broker == nil {
		return
	}
	for _, b := range e.broker.brokers {
		if e.broker.server == nil {
			if err := b.Remove(context.Background()); err != nil && warn != nil {
				warn(fmt.Errorf("remove the run's streams from %s: %w", natsbroker.Redacted(e.broker.url), err))
			}
		}
		b.Close()
	}
	if e.broker.server != nil {
		e.broker.server.Shutdown()
	}
}

// checkBroker refuses a real broker for a lesson that cannot take one, or
// with --processes, whose child instances cannot reach it yet.
func checkBroker(sc *Scenario, opts Options) error {
	switch kind := opts.Broker; {
	case kind == "" || kind == "lab":
		return nil
	case kind != "nats" && !strings.HasPrefix(kind, "nats://"):
		return fmt.Errorf("--broker must be lab, nats or nats://HOST:PORT, not %q", kind)
	case !sc.RealBroker:
		return fmt.Errorf("scenario %s runs on the lab's broker only", sc.Name)
	case opts.Processes:
		return fmt.Errorf("--broker %s runs the lesson's instances in the lab's process; --processes cannot reach it yet", kind)
	}
	return nil
}

// BrokerName is the broker a run's texts name ({broker_name}): the lab's
// own, or NATS JetStream (--broker nats).
func BrokerName(opts Options) string {
	if opts.Broker == "" || opts.Broker == "lab" {
		return "the lab's broker"
	}
	return "NATS JetStream"
}

// MeasureBrokerContract moves, in a run on a real broker, the lesson's
// BrokerContract checks out of r's checks and into the table of what
// differed ([measureBrokerContract]). A lesson calls it before it words
// its verdict, which must not count them; on the lab's broker it does
// nothing.
func (e *Env) MeasureBrokerContract(r *lab.Result) {
	if e.broker != nil {
		measureBrokerContract(r, e.Scenario.BrokerContract)
	}
}

// measureBrokerContract moves the checks named contract, a lesson's
// checks of the lab broker's own contract, out of a real broker's run's
// verdict and into a table of what differed from the lab's broker, each
// with the figure the lab's broker is expected to give and the real
// broker's, read off the run:
// JetStream matches an ack by the message's stream sequence, not by the
// delivery it names, so what it did is measured, not judged. The
// lesson's own point stays checked.
func measureBrokerContract(r *lab.Result, contract []string) {
	if len(contract) == 0 {
		return
	}
	t := lab.Table{Title: "What differed on NATS JetStream",
		Note: "Checks of the lab broker's own ack contract, measured on JetStream instead of judged: JetStream matches an ack by " +
			"the message's stream sequence, not by the delivery it names, so an ack of an earlier delivery may take and a later one " +
			"find nothing left to ack. The design's checks do not depend on it.",
		Columns: []string{"Check", "What it measures", "Expected (lab broker)", "JetStream", "Same"}, RealBroker: true}
	r.Checks = slices.DeleteFunc(r.Checks, func(c lab.Check) bool {
		if !slices.Contains(contract, c.Name) {
			return false
		}
		t.AddRow(c.Name, r.Fill(c.About), c.Expected, c.Observed, map[bool]string{true: "yes", false: "no"}[c.Passed])
		return true
	})
	r.Tables = append([]lab.Table{t}, r.Tables...)
}
