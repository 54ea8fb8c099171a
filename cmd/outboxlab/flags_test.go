package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagValues: duration overflow says "too long", and every whole-number
// flag (--repeat, --bound, --rows, --jobs) is read in decimal only.
func TestFlagValues(t *testing.T) {
	t.Parallel()
	leasing := "session-15-outbox-leasing"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"DaysOverflow", []string{"run", leasing, "--inbox-retention", "106752d"}, "too long"},
		{"DaysPlusOverflow", []string{"run", leasing, "--inbox-retention", "106751d23h59m59s"}, "too long"},
		{"HoursOverflow", []string{"run", leasing, "--broker-window", "9999999h"}, "too long"},
		{"RepeatHex", []string{"run", leasing, "--repeat", "0x10"}, "decimal"},
		{"RepeatOctal", []string{"run", leasing, "--repeat", "010"}, "decimal"},
		{"RepeatWords", []string{"run", leasing, "--repeat", "many"}, "invalid value"},
		{"RepeatZero", []string{"run", leasing, "--repeat", "0"}, "at least 1"},
		{"BoundHex", []string{"run", "explore", "--bound", "0x3"}, "decimal"},
		{"BoundOctal", []string{"run", "explore", "--bound", "03"}, "decimal"},
		{"RowsHex", []string{"inspect", "--rows", "0x10", "x.db"}, "decimal"},
		{"RowsOctal", []string{"inspect", "--rows", "010", "x.db"}, "decimal"},
		{"JobsHex", []string{"grade", "--jobs", "0x2", "x.sql"}, "decimal"},
		{"JobsBinary", []string{"grade", "--jobs", "0b10", "x.sql"}, "decimal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := tt.args
			if args[0] != "inspect" {
				args = append(args, "--out", filepath.Join(t.TempDir(), "r"))
			}
			o := runCLI(t, args...)
			if o.code != exitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", o.code, o.stderr, tt.want)
			}
		})
	}
	if d, err := parseDuration("x", "106751d"); err != nil || d <= 0 {
		t.Errorf("106751d: %v %v, want it accepted", d, err)
	}
}
