package cast

import "testing"

// TestFirstWriteStands: a retry that changed 0 rows finds its own first
// send standing only when that send committed and the row is done under
// the same name and token at the time it stamped; each field that differs
// makes the 0 rows a fence.
func TestFirstWriteStands(t *testing.T) {
	t.Parallel()
	mine := Mark{Done: true, By: "Worker-B", Token: 2, At: "2026-01-15T09:00:31.000Z"}
	for _, tc := range []struct {
		name      string
		committed bool
		back      Mark
		want      bool
	}{
		{"its own commit", true, mine, true},
		{"the first send changed no row", false, mine, false},
		{"the row is not done", true, Mark{By: "Worker-B", Token: 2, At: mine.At}, false},
		{"another owner finished it", true, Mark{Done: true, By: "Worker-C", Token: 2, At: mine.At}, false},
		{"a newer claim's token", true, Mark{Done: true, By: "Worker-B", Token: 3, At: mine.At}, false},
		{"finished at another time", true, Mark{Done: true, By: "Worker-B", Token: 2, At: "2026-01-15T09:00:40.000Z"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FirstWriteStands(tc.committed, mine, tc.back); got != tc.want {
				t.Errorf("FirstWriteStands(%v, %+v, %+v) = %v, want %v", tc.committed, mine, tc.back, got, tc.want)
			}
		})
	}
}
