package lab

import "testing"

func TestRows(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0 rows"}, {1, "1 row"}, {2, "2 rows"}} {
		if got := Rows(tt.n); got != tt.want {
			t.Errorf("Rows(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestCount: a count reads with its noun, singular only for one.
func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0 sends", 1: "1 send", 2: "2 sends"} {
		if got := Count(n, "send", "sends"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
