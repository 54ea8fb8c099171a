package session20inbox

import (
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/cast"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/lesson/lessontest"
)

// TestInboxRetentionEffectsNameTheirService: part 1 short's two credits of
// e20 come from two instances of one consumer service, and each effect
// says which service it is for (where its instance learned it, not from
// its words), so the page's per-message view can count them as one
// service's double effect.
func TestInboxRetentionEffectsNameTheirService(t *testing.T) {
	t.Parallel()
	r := lessontest.Must(t, &Lesson, "")
	actors := map[string]bool{}
	for _, e := range r.Timeline {
		if e.Kind != lab.KindEffect && e.Kind != lab.KindDedup {
			continue
		}
		if e.Service != cast.CreditService {
			t.Errorf("#%d %s's %s of %s is for service %q, want %q", e.Seq, e.Actor, e.Kind, e.Subject, e.Service, cast.CreditService)
		}
		if e.Kind == lab.KindEffect && e.Subject == "e20" && strings.HasPrefix(e.At, "part 1 short") {
			actors[e.Actor] = true
		}
	}
	if len(actors) != 2 {
		t.Errorf("part 1 short: e20 credited by %v, want two instances", actors)
	}
}
