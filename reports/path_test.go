package reports_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

// TestPathNamesReportsAsTheCourseDoes: words joined by hyphens, the variant
// and a student's own SQL after the lesson, then RunReport and the UTC time.
func TestPathNamesReportsAsTheCourseDoes(t *testing.T) {
	at := time.Date(2026, 1, 15, 10, 0, 0, 0, time.FixedZone("CET", 3600)) // 09:00 UTC
	for _, c := range []struct {
		r    lab.Result
		want string
	}{
		{lab.Result{Session: "Session-15", FileTag: "Outbox-Leasing"},
			"Session-15-Outbox-Leasing-RunReport-20260115T090000Z.txt"},
		{lab.Result{Session: "Session-15", FileTag: "Competing-Workers-No-Claim"},
			"Session-15-Competing-Workers-No-Claim-RunReport-20260115T090000Z.txt"},
		{lab.Result{Session: "Session-15", FileTag: "Outbox-Leasing", Variant: "permanent-lock"},
			"Session-15-Outbox-Leasing-permanent-lock-RunReport-20260115T090000Z.txt"},
		{lab.Result{Session: "Session-15", FileTag: "Outbox-Leasing", CustomSQL: "claim from mine.sql"},
			"Session-15-Outbox-Leasing-YourSQL-RunReport-20260115T090000Z.txt"},
	} {
		got := reports.Path("out", &c.r, at)
		if want := filepath.Join("out", "Session-15", c.want); got != want {
			t.Errorf("Path = %s, want %s", got, want)
		}
	}
}
