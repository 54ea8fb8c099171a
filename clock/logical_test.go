package clock

import "testing"

func TestLogical(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		t    int64
		want string
	}{{0, "t=0"}, {130, "t=130"}, {-5, "t=-5"}} {
		if got := Logical(tt.t); got != tt.want {
			t.Errorf("Logical(%d) = %q, want %q", tt.t, got, tt.want)
		}
	}
}
