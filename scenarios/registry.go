// Package scenarios is the lab's registry: every lesson in course order,
// each a package of its own in a folder below this one (what a lesson is,
// and how a run of it is framed, is package lesson), and the course's
// exercises, each graded by a lesson's run.
package scenarios

import (
	"fmt"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/scenarios/explorer"
	"github.com/outboxlab/outboxlab/scenarios/session14outbox"
	"github.com/outboxlab/outboxlab/scenarios/session15latefinalize"
	"github.com/outboxlab/outboxlab/scenarios/session15leasing"
	"github.com/outboxlab/outboxlab/scenarios/session15noclaim"
	"github.com/outboxlab/outboxlab/scenarios/session16fencing"
	"github.com/outboxlab/outboxlab/scenarios/session17renewal"
	"github.com/outboxlab/outboxlab/scenarios/session18expiry"
	"github.com/outboxlab/outboxlab/scenarios/session19failures"
	"github.com/outboxlab/outboxlab/scenarios/session20inbox"
	"github.com/outboxlab/outboxlab/scenarios/session21batch"
	"github.com/outboxlab/outboxlab/scenarios/session21scale"
	"github.com/outboxlab/outboxlab/scenarios/session22heartbeat"
	"github.com/outboxlab/outboxlab/scenarios/session23clocks"
)

// registry lists every scenario in course order. Adding a lesson is one
// new folder below this one (a package whose Lesson is its
// [lesson.Scenario]) plus one line here.
var registry = []*lesson.Scenario{
	&session14outbox.Lesson,
	&session15noclaim.Lesson,
	&session15leasing.Lesson,
	&session15latefinalize.Lesson,
	&session16fencing.Lesson,
	&session17renewal.Lesson,
	&session18expiry.Lesson,
	&session19failures.Lesson,
	&session20inbox.Lesson,
	&session21scale.Lesson,
	&session21batch.Lesson,
	&session22heartbeat.Lesson,
	&session23clocks.Lesson,
	&explorer.Lesson,
}

// UnknownScenarioError is returned by [Lookup] for a name not in the registry.
type UnknownScenarioError struct {
	Name        string
	Suggestions []string // the closest registered names, best first
}

func (e *UnknownScenarioError) Error() string {
	msg := fmt.Sprintf("unknown scenario %q", e.Name)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + strings.Join(e.Suggestions, " or ") + "?"
	}
	return msg + " (see `outboxlab list`)"
}

// All returns every registered scenario in course order.
func All() []*lesson.Scenario { return append([]*lesson.Scenario(nil), registry...) }

// Lookup finds a scenario by name. An unknown name yields an
// [UnknownScenarioError] with the closest names.
func Lookup(name string) (*lesson.Scenario, error) {
	for _, s := range registry {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(registry))
	for i, s := range registry {
		names[i] = s.Name
	}
	return nil, &UnknownScenarioError{Name: name, Suggestions: closest(name, names)}
}

// closest ranks names (a registry's) by edit distance (or containment) to
// name and keeps those close enough to be a plausible typo.
func closest(name string, names []string) []string {
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	for _, known := range names {
		d := levenshtein.ComputeDistance(name, known)
		if name != "" && strings.Contains(known, name) {
			d = min(d, len(known)-len(name))
			d = min(d, 3)
		}
		if d <= max(3, len(known)/3) {
			cands = append(cands, cand{known, d})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	for i, c := range cands {
		if i == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}
