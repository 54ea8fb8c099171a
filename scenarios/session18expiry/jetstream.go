package session18expiry

import (
	"slices"

	"github.com/outboxlab/outboxlab/lab"
)

// brokerContractChecks are session 18's checks of the broker's own
// contract, not of the relays' or consumers' design: the lab's broker
// fences an ack that names an earlier delivery (its receipt) and takes
// the current one. On a real broker they measure what that broker does.
var brokerContractChecks = []string{"stale_receipt_ack_rows", "redelivery_ack_rows"}

// differsOnJetStream moves the broker-contract checks of a run on NATS
// JetStream out of the verdict and into a table of what differed from the
// lab's broker, each with the lab broker's figure and JetStream's, read
// off the run: JetStream matches an ack by the message's stream sequence,
// not by its delivery count, so whatever it did is measured, not judged.
// The lesson's own point (two offers, the inbox's one credit against the
// naive consumer's two, the stale completion fenced) stays checked.
func differsOnJetStream(r *lab.Result) {
	t := lab.Table{Title: "What differed on NATS JetStream",
		Note: "Checks of the lab broker's own ack contract, measured on JetStream instead of judged: JetStream matches an ack by " +
			"the message's stream sequence, not by the delivery it names, so an ack of an earlier delivery may take and a later one " +
			"find nothing left to ack. The design's checks above do not depend on it.",
		Columns: []string{"Check", "What it measures", "Lab broker", "JetStream", "Same"}}
	r.Checks = slices.DeleteFunc(r.Checks, func(c lab.Check) bool {
		if !slices.Contains(brokerContractChecks, c.Name) {
			return false
		}
		same := "yes"
		if !c.Passed {
			same = "no"
		}
		t.AddRow(c.Name, r.Fill(c.About), c.Expected, c.Observed, same)
		return true
	})
	r.Tables = append([]lab.Table{t}, r.Tables...)
}
