package cast

import "testing"

func TestDurationText(t *testing.T) {
	tests := []struct {
		ticks int64
		want  string
	}{
		{0, "0s"}, {30 * TickSecond, "30s"}, {2 * TickMinute, "2m"}, {24 * TickHour, "24h"},
		{3 * TickDay, "3d"}, {7*TickDay + 90*TickSecond, "7d1m30s"}, {90 * TickMinute, "1h30m"},
	}
	for _, tt := range tests {
		if got := DurationText(tt.ticks); got != tt.want {
			t.Errorf("durationText(%d) = %q, want %q", tt.ticks, got, tt.want)
		}
	}
}
