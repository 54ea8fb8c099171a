package scenarios

import (
	"slices"
	"strings"

	"github.com/outboxlab/outboxlab/lesson"
)

// LessonOption is an option ([lesson.Option]) with the lessons that read
// it, in course order.
type LessonOption struct {
	lesson.Option
	Readers []*lesson.Scenario
}

// Options lists every option a registered lesson reads, once per flag, in
// the course order of its first reader: cmd makes a flag of each.
func Options() []LessonOption {
	var out []LessonOption
	for _, sc := range registry {
		for _, o := range sc.Options {
			i := slices.IndexFunc(out, func(lo LessonOption) bool { return lo.Flag == o.Flag })
			if i < 0 {
				out = append(out, LessonOption{Option: o})
				i = len(out) - 1
			}
			out[i].Readers = append(out[i].Readers, sc)
		}
	}
	return out
}

// ReadBy names the lessons that read the option, as --help and its
// errors do: "session 18, session 20", "explore".
func (o LessonOption) ReadBy() string {
	names := make([]string, len(o.Readers))
	for i, sc := range o.Readers {
		names[i] = strings.ToLower(strings.ReplaceAll(sc.Session, "-", " "))
	}
	return strings.Join(names, ", ")
}
