package scenarios

import (
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestLessonsOnJetStream runs every lesson that takes a real broker
// (--broker nats), as designed and in each variant, on an embedded NATS
// JetStream: it fails exactly the checks it fails on the lab's broker,
// but for its broker-contract checks, which the table of what differed
// measures instead; and its report names the broker and holds JetStream's
// publish acknowledgements, one per offer the broker's own record holds.
// As designed, it shows the course's figures (TestCourseFigures' on the
// lab's broker), on SQLite and, where pgtest gives a server, on
// PostgreSQL.
func TestLessonsOnJetStream(t *testing.T) {
	t.Parallel()
	for _, sc := range All() {
		if !sc.RealBroker {
			continue
		}
		for _, variant := range append([]string{""}, sc.VariantNames()...) {
			t.Run(sc.Name+"/"+variant, func(t *testing.T) {
				t.Parallel()
				opts := lesson.DefaultOptions()
				opts.Broker = "nats"
				r := lessontest.Execute(t, sc, variant, opts)
				onLab := lessontest.Must(t, sc, variant)
				want := slices.DeleteFunc(onLab.FailedChecks(), func(c string) bool { return slices.Contains(sc.BrokerContract, c) })
				if got := r.FailedChecks(); !slices.Equal(got, want) {
					t.Errorf("on JetStream failed %v; on the lab's broker %v", got, want)
				}
				for _, c := range r.Checks {
					if slices.Contains(sc.BrokerContract, c.Name) {
						t.Errorf("%s is still judged on JetStream", c.Name)
					}
				}
				if len(sc.BrokerContract) > 0 {
					if d := lessontest.Table(t, r, "What differed on NATS JetStream"); len(d.Rows) != len(sc.BrokerContract) {
						t.Errorf("what differed: %d rows, want one per broker-contract check", len(d.Rows))
					}
				}
				if !strings.Contains(r.Settings["broker"], "NATS JetStream") {
					t.Errorf("the report names the broker %q", r.Settings["broker"])
				}
				if variant == "" {
					for _, d := range figureDiffs(sc.Figures, r) {
						t.Error(d)
					}
					if !r.Passed() || strings.Contains(r.Verdict, "NOT SHOWN") || strings.Contains(r.Verdict, "FAILED") {
						t.Errorf("as designed: passed %v, verdict %q", r.Passed(), r.Verdict)
					}
				}
				if acks, offers := rowsTitled(r, "JetStream: publish acknowledgements"), rowsTitled(r, "Ledger: broker offers (NATS JetStream's answers)"); acks == 0 || acks != offers {
					t.Errorf("%d publish acknowledgements for %d offers", acks, offers)
				}
			})
		}
	}
}

// TestLessonsOnJetStreamOnPostgres runs every lesson that takes a real
// broker, as designed, on an embedded NATS JetStream and PostgreSQL: it
// passes and shows the course's figures.
func TestLessonsOnJetStreamOnPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	for _, sc := range All() {
		if !sc.RealBroker {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			opts := lesson.DefaultOptions()
			opts.Broker, opts.Database = "nats", db
			r := lessontest.Execute(t, sc, "", opts)
			if !r.Passed() {
				t.Errorf("failed %v", r.FailedChecks())
			}
			for _, d := range figureDiffs(sc.Figures, r) {
				t.Error(d)
			}
		})
	}
}

// rowsTitled counts the rows of r's tables whose title starts with title
// (a run of several parts titles each part's table after its part).
func rowsTitled(r *lab.Result, title string) int {
	n := 0
	for _, tb := range r.Tables {
		if strings.HasPrefix(tb.Title, title) {
			n += len(tb.Rows)
		}
	}
	return n
}
