package scenarios

import (
	"regexp"
	"slices"
	"testing"
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
	sc        *Scenario
	instances []string // the kinds of instance the lesson asks env.Instances for
	key       runKey
}{
	{&transactionalOutbox, []string{"Checkout"}, runKey{}},
	{&outboxLeasing, []string{"Outbox"}, runKey{}},
	{&staleAckFencing, []string{"Relay"}, runKey{}},
	{&leaseExpiryAfterSend, []string{"PipelineRelay", "PipelineConsumer"}, runKey{}},
	{&batchCompletion, []string{"BatchRelay"}, runKey{}},
	{&claimsAtScale, []string{"ScaleWorker"}, runKey{}},
	{&heartbeatAndShutdown, []string{"HeartbeatRelays"}, runKey{}},
	{&clocksAndOutages, []string{"ClockRelay"}, runKey{}},
	{&interleavingExplorer, []string{"ExploreRelay"}, runKey{bound: 3}},
	{&staleAckFencing, []string{"Relay"}, runKey{processes: true}},
}

// TestRaceOneLessonPerInstanceKind runs raceRuns and asserts each passes.
// Without -race the runs come from the cache the registry tests filled;
// under -race (make test) they are this binary's only lesson runs.
func TestRaceOneLessonPerInstanceKind(t *testing.T) {
	t.Parallel()
	for _, rr := range raceRuns {
		name := rr.sc.Name
		if rr.key.processes {
			name += " processes"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := executeRun(t, rr.sc, rr.key)
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
		if !rr.key.processes {
			covered = append(covered, rr.instances...)
		}
	}
	for _, kind := range instanceKindsAsked(t) {
		if !slices.Contains(covered, kind) {
			t.Errorf("no lesson in raceRuns asks for a %s instance: add one", kind)
		}
	}
}

// instanceKindsAsked reads, off this package's non-test source, the
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
