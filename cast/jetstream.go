package cast

import (
	"fmt"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/natsbroker"
	"github.com/outboxlab/outboxlab/store"
)

// UseJetStream runs p on the real broker b instead of the lab's: every
// connection's instances offer to it, take deliveries from it and ack
// there, and [FinishDelivery] reports JetStream's answers; where says
// what and where its server is.
func (p *Pipeline) UseJetStream(b *natsbroker.Broker, where string) {
	p.jetStream, p.jetStreamWhere = b, where
	p.NewBroker, p.BrokerName = func(*store.DB) store.Broker { return b }, "NATS JetStream"
}

// DeliveriesRecord names where p's broker keeps its deliveries, as a
// report's sentence says it: the lab's broker_deliveries table, or a
// real broker's record of its answers.
func (p *Pipeline) DeliveriesRecord() string {
	if p.BrokerName != "" {
		return p.BrokerName + "'s delivery record"
	}
	return "broker_deliveries"
}

// jetStreamReport adds what JetStream answered in each pipeline that ran
// on it to r: its tables (titled by the pipeline's part where the run has
// several) and the broker setting the texts quote.
func jetStreamReport(r *lab.Result, ps []*Pipeline) {
	for _, p := range ps {
		if p.jetStream == nil {
			continue
		}
		r.SetSetting("broker", p.jetStreamWhere)
		tables := JetStreamTables(p.jetStream, p.jetStreamWhere)
		if len(ps) > 1 && p.Label != "" {
			for i := range tables {
				tables[i].Title += " (" + p.Label + ")"
			}
		}
		if n := p.OutageRetries(); n > 0 {
			tables = append(tables, lab.Table{Title: "JetStream: sends retried during an outage", RealBroker: true,
				Note: "Sends that found the broker unavailable and were sent again while the relay held its claim; " +
					"the timeline's \"send failed\" events say when.", Columns: []string{"Retried sends"}, Rows: [][]string{{fmt.Sprint(n)}}})
		}
		r.Tables = append(r.Tables, tables...)
	}
}
