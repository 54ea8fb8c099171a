package scenarios

import (
	"regexp"
	"slices"
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/scenarios/session14outbox"
	"github.com/outboxlab/outboxlab/scenarios/session15leasing"
	"github.com/outboxlab/outboxlab/scenarios/session16fencing"
	"github.com/outboxlab/outboxlab/scenarios/session18expiry"
	"github.com/outboxlab/outboxlab/scenarios/session21batch"
	"github.com/outboxlab/outboxlab/scenarios/session21scale"
	"github.com/outboxlab/outboxlab/scenarios/session22heartbeat"
	"github.com/outboxlab/outboxlab/scenarios/session23clocks"
)

// raceRuns are the runs make test repeats under the race detector (go test
// -race -run '^TestRace'), one lesson per kind of application instance,
// each in the lab's process, and one lesson whose instances are child
// processes. The rest of this package's tests run without -race: modernc's
// SQLite is C translated to Go, so -race instruments the whole database
// engine and makes a lesson about fifteen times slower, while the lab's own
// goroutines (the workers, the barrier, the broker's and the heartbeat's
// loops, the pipes to children) are the same in every lesson that uses an
// instance of that kind.
var raceRuns = []struct {
	sc        *lesson.Scenario
	instances []string // the kinds of instance the lesson asks env.Instances for
	key       lessontest.Key
}{
	{&session14outbox.Lesson, []string{"Checkout"}, lessontest.Key{}},
	{&session15leasing.Lesson, []string{"Outbox"}, lessontest.Key{}},
	{&session16fencing.Lesson, []string{"Relay"}, lessontest.Key{}},
	{&session18expiry.Lesson, []string{"PipelineRelay", "PipelineConsumer"}, lessontest.Key{}},
	{&session21batch.Lesson, []string{"BatchRelay"}, lessontest.Key{}},
	{&session21scale.Lesson, []string{"ScaleWorker"}, lessontest.Key{}},
	{&session22heartbeat.Lesson, []string{"HeartbeatRelays"}, lessontest.Key{}},
	{&session23clocks.Lesson, []string{"ClockRelay"}, lessontest.Key{}},
	{&explorer.Lesson, []string{"ExploreRelay"}, lessontest.Key{Bound: 3}},
	{&session16fencing.Lesson, []string{"Relay"}, lessontest.Key{Processes: true}},
}

// TestRaceOneLessonPerInstanceKind runs raceRuns and asserts each passes.
// Without -race the runs come from the cache the registry tests filled;
// under -race (make test) they are this binary's only lesson runs.
func TestRaceOneLessonPerInstanceKind(t *testing.T) {
	t.Parallel()
	for _, rr := range raceRuns {
		name := rr.sc.Name
		if rr.key.Processes {
			name += " processes"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := lessontest.Run(t, rr.sc, rr.key)
			if !r.Passed() {
				t.Fatalf("%s (instances: %v) failed %v", rr.sc.Name, rr.instances, r.FailedChecks())
			}
		})
	}
}

// TestRaceRunsCoverEveryInstanceKind: every kind of instance a lesson can
// ask for has a lesson in raceRuns run in the lab's process, so a new kind cannot escape the race
// detector unnoticed. The kinds are read off the lessons' own source.
func TestRaceRunsCoverEveryInstanceKind(t *testing.T) {
	var covered []string
	for _, rr := range raceRuns {
		if !rr.key.Processes {
			covered = append(covered, rr.instances...)
		}
	}
	for _, kind := range instanceKindsAsked(t) {
		if !slices.Contains(covered, kind) {
			t.Errorf("no lesson in raceRuns asks for a %s instance: add one", kind)
		}
	}
}

// instanceKindsAsked reads, off the lesson folders' non-test source, the
// methods of env.Instances the lessons call to start an instance.
func instanceKindsAsked(t *testing.T) []string {
	t.Helper()
	notAnInstance := map[string]bool{"Stop": true, "ProcessesTable": true}
	asked := regexp.MustCompile(`env\.Instances\.([A-Z]\w*)`)
	var kinds []string
	for _, src := range packageSources(t) {
		for _, m := range asked.FindAllStringSubmatch(string(src), -1) {
			if !notAnInstance[m[1]] && !slices.Contains(kinds, m[1]) {
				kinds = append(kinds, m[1])
			}
		}
	}
	if len(kinds) < 9 {
		t.Fatalf("found only %d kinds of instance (%v): the pattern no longer matches the lessons", len(kinds), kinds)
	}
	return kinds
}
