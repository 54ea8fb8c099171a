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
