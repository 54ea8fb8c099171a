package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// TestCheckOutConcurrently: checks of the same report paths at once, as
// graders sharing one --out make them, never collide on their probes.
func TestCheckOutConcurrently(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	paths := []string{filepath.Join(out, "Grade", "Grade-Summary-20260115T090000Z.txt"),
		filepath.Join(out, "claim", "Session-15", "Session-15-Outbox-Leasing-YourSQL-RunReport-20260115T090000Z.txt")}
	var wg sync.WaitGroup
	errs := make(chan error, 64*20)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := checkOut(out, paths...); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, dir := range []string{out, filepath.Dir(paths[0]), filepath.Dir(paths[1])} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 && dir != out {
			t.Errorf("probes left in %s: %v", dir, entries)
		}
	}
}
