package lesson

import (
	"testing"
	"time"
)

func TestDurationText(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{24 * time.Hour, "24h"}, {48 * time.Hour, "2d"}, {7 * 24 * time.Hour, "7d"}, {2 * time.Minute, "2m"}, {300 * time.Millisecond, "300ms"},
		{36 * time.Hour, "36h"}, {90 * time.Minute, "1h30m"}, {90 * time.Second, "1m30s"}, {0, "0s"},
	}
	for _, tt := range tests {
		if got := DurationText(tt.d); got != tt.want {
			t.Errorf("DurationText(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
