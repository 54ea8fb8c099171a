package scenarios

import (
	"testing"

	"github.com/outboxlab/outboxlab/lesson"
)

// TestOptionsAgree: an option two lessons read is one option, the same
// text setting the same field of lesson.Options; and each option sets
// exactly one field, a duration or a count.
func TestOptionsAgree(t *testing.T) {
	if len(Options()) == 0 {
		t.Fatal("no lesson reads an option")
	}
	for _, o := range Options() {
		if (o.Duration == nil) == (o.Count == nil) || o.Usage == "" {
			t.Errorf("--%s must set exactly one field, a duration or a count, and say what it sets", o.Flag)
		}
		for _, sc := range o.Readers {
			for _, mine := range sc.Options {
				if mine.Flag == o.Flag && !sameOption(mine, o.Option) {
					t.Errorf("%s reads --%s as another option than %s does", sc.Name, o.Flag, o.Readers[0].Name)
				}
			}
		}
	}
}

// sameOption reports whether a and b say the same and set the same field.
func sameOption(a, b lesson.Option) bool {
	if a.Usage != b.Usage || a.Max != b.Max || a.Default != b.Default || (a.Duration == nil) != (b.Duration == nil) {
		return false
	}
	var o lesson.Options
	if a.Duration != nil {
		*a.Duration(&o) = 12345
		return *b.Duration(&o) == 12345
	}
	*a.Count(&o) = 12345
	return *b.Count(&o) == 12345
}
