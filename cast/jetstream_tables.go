package cast

import (
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
)

// JetStreamTables are what NATS JetStream answered in a run on it: each
// publish acknowledgement (stream sequence and duplicate flag), each
// delivery (the delivery count it reported), each ack and whether it
// took, the advisories, and the real durations the wall-clock parts ran
// for (its duplicate window and ack wait), beside the lesson's.
// where names the server, as the timing table's note says.
func JetStreamTables(b *natsbroker.Broker, where string) []lab.Table {
	a := b.Answers()
	t := a.Timings
	timing := lab.Table{Title: "JetStream: the real durations this run used",
		Note: "The broker was " + where + ". JetStream's duplicate window and ack wait run on the wall clock; the lab ran them short and scaled every " +
			"scenario step to real time, so each lesson period compares with them as it would. Every other step is on the scenario clock.",
		Columns: []string{"What", "In the lesson (scenario clock)", "Ran as (real time)"}}
	timing.AddRow("one scenario second", "1s", t.Scale.String())
	if t.Window > 0 {
		timing.AddRow("duplicate window (the stream's Duplicates)", DurationText(TicksOf(t.Window)), t.WindowReal.String())
	} else {
		timing.AddRow("duplicate window (the stream's Duplicates)", "none", "not used: no Nats-Msg-Id sent")
	}
	timing.AddRow("visibility timeout (the consumers' AckWait)", DurationText(TicksOf(t.Visibility)), t.AckWaitReal.String())
	timing.AddRow("longest step run to scale (a longer one is compressed)", DurationText(TicksOf(t.Threshold)), t.ThresholdReal.String())
	timing.AddRow("steps compressed", "-", fmt.Sprint(t.CompressedJumps))
	pubs := lab.Table{Title: "JetStream: publish acknowledgements", Note: "Each offer as JetStream acknowledged it: its stream sequence, " +
		"and Duplicate when its Nats-Msg-Id (the event id) fell inside the stream's duplicate window.",
		Columns: []string{"Offer", "Event", "Nats-Msg-Id sent", "Stream seq", "Duplicate", "Error"}}
	for _, o := range a.Offers {
		pubs.AddRow(o.OfferID, o.EventID, o.MsgID, o.StreamSeq, o.Duplicate, orNone(o.Err))
	}
	dels := lab.Table{Title: "JetStream: deliveries", Note: "Each message a durable pull consumer fetched, with the delivery count JetStream reported (the receipt its ack carries).",
		Columns: []string{"Consumer", "Offer", "Stream seq", "Consumer seq", "Delivery count"}}
	for _, d := range a.Deliveries {
		dels.AddRow(d.Consumer, d.OfferID, d.StreamSeq, d.ConsumerSeq, d.NumDelivered)
	}
	acks := lab.Table{Title: "JetStream: acks", Note: "Each ack the consumers sent on a delivery's own message, and whether JetStream took it " +
		"(its ack metric came back): JetStream matches an ack by stream sequence, so an ack of an earlier delivery can take.",
		Columns: []string{"Consumer", "Offer", "Receipt", "Latest delivery", "Sent", "Took", "Error"}}
	for _, k := range a.Acks {
		acks.AddRow(k.Consumer, k.OfferID, k.Receipt, k.Latest, k.Sent, k.Took, orNone(k.Err))
	}
	tables := []lab.Table{timing, pubs, dels, acks}
	if len(a.Advisories) > 0 {
		adv := lab.Table{Title: "JetStream: advisories", Note: "What JetStream announced on its advisory subjects: max_deliveries when a consumer " +
			"gave up on a message after its MaxDeliver deliveries (the lab then copies it into the dead-letter stream).",
			Columns: []string{"Advisory", "Consumer", "Stream seq", "Deliveries"}}
		for _, v := range a.Advisories {
			adv.AddRow(v.Kind, v.Consumer, v.StreamSeq, v.Deliveries)
		}
		tables = append(tables, adv)
	}
	if len(a.Notes) > 0 {
		// What the adapter saw the wall clock do that the scenario clock
		// would not have (a window or ack wait run out early on a busy
		// machine, an answer JetStream never gave): an outcome it names may
		// differ from the lesson's.
		notes := lab.Table{Title: "JetStream: what the adapter noted", Note: "Where JetStream's wall clock ran ahead of the " +
			"scenario clock, or JetStream gave no answer the adapter waited for: an outcome named here may differ from the lesson's.",
			Columns: []string{"Note"}}
		for _, n := range a.Notes {
			notes.AddRow(n)
		}
		tables = append(tables, notes)
	}
	for i := range tables {
		tables[i].RealBroker = true // the HTML page shows them too
	}
	return tables
}

// orNone is s, or "-" for nothing.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
