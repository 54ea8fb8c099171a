package session18expiry

import (
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestOnJetStream runs session 18 on an embedded NATS JetStream
// (--broker nats): the lesson's point holds on the real broker (two
// offers, one inbox credit against the naive consumer's two, the stale
// completion fenced), the broker-contract checks are measured in the
// table of what differed, with JetStream's own figures, and each variant
// fails by the checks it fails on the lab's broker.
func TestOnJetStream(t *testing.T) {
	t.Parallel()
	for _, variant := range append([]string{""}, Lesson.VariantNames()...) {
		t.Run("variant "+variant, func(t *testing.T) {
			t.Parallel()
			opts := lesson.DefaultOptions()
			opts.Broker = "nats"
			r := lessontest.Execute(t, &Lesson, variant, opts)
			onLab := lessontest.Must(t, &Lesson, variant)
			if got, want := r.FailedChecks(), withoutBrokerContract(onLab.FailedChecks()); !slices.Equal(got, want) {
				t.Errorf("on JetStream failed %v; on the lab's broker %v", got, want)
			}
			differed := lessontest.Table(t, r, "What differed on NATS JetStream")
			if len(differed.Rows) != len(brokerContractChecks) {
				t.Errorf("what differed: %d rows, want one per broker-contract check", len(differed.Rows))
			}
			for _, c := range r.Checks {
				if slices.Contains(brokerContractChecks, c.Name) {
					t.Errorf("%s is still judged on JetStream", c.Name)
				}
			}
			acks := lessontest.Table(t, r, "JetStream: publish acknowledgements")
			if len(acks.Rows) == 0 {
				t.Error("no publish acknowledgement recorded")
			}
			if r.Settings["broker"] == "" {
				t.Error("the report does not name the broker")
			}
		})
	}
}

// withoutBrokerContract is failed without the broker-contract checks,
// which a run on JetStream measures rather than judges.
func withoutBrokerContract(failed []string) []string {
	return slices.DeleteFunc(slices.Clone(failed), func(c string) bool { return slices.Contains(brokerContractChecks, c) })
}
