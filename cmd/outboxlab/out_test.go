package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutCheckedBeforeRun: a --out that cannot take the report fails with
// exit 2 before the scenario runs.
func TestOutCheckedBeforeRun(t *testing.T) {
	t.Parallel()
	inTheWay := t.TempDir()
	if err := os.WriteFile(filepath.Join(inTheWay, "Session-15"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	long := t.TempDir()
	for len(long) < 4000 {
		long = filepath.Join(long, strings.Repeat("d", 200))
	}
	tests := []struct {
		name, out, want string
	}{
		{"FileInTheWay", inTheWay, "in the way"},
		{"TooLong", long, "too long"},
		{"Empty", "", "--out must name a folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, "run", "session-15-outbox-leasing", "--out", tt.out)
			if o.code != exitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", o.code, o.stderr, tt.want)
			}
			if strings.Contains(o.stdout, "PASS") {
				t.Error("the scenario ran before --out was checked")
			}
		})
	}
}
