package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

// goldenRuns are the reports kept as golden files: every scenario as
// designed, plus variants whose report teaches something of its own.
func goldenRuns() [][2]string {
	var runs [][2]string
	for _, sc := range scenarios.All() {
		if skipGolden[sc.Name] == "" {
			runs = append(runs, [2]string{sc.Name, ""})
		}
	}
	return append(runs, [2]string{"session-15-outbox-leasing", "permanent-lock"})
}

// skipGolden names scenarios whose reports are made of measured timings,
// with the reason; their figures are asserted by their own tests.
var skipGolden = map[string]string{}

// TestGoldenReports runs each scenario through the CLI and compares its
// report with testdata/golden after normalizing what legitimately varies:
// wall-clock time, temporary paths, and tables marked as interleaved.
// Refresh with: go test ./cmd/outboxlab -run TestGoldenReports -update
func TestGoldenReports(t *testing.T) {
	t.Parallel()
	for _, run := range goldenRuns() {
		name, variant := run[0], run[1]
		file := name
		if variant != "" {
			file += "--" + variant
		}
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			args := []string{"run", name, "--format", "json", "--out", t.TempDir()}
			if variant != "" {
				args = append(args, "--variant", variant)
			}
			got := runCLI(t, args...)
			var res reports.JSONResult
			if err := json.Unmarshal([]byte(got.stdout), &res); err != nil {
				t.Fatalf("exit %d, %v: %s %s", got.code, err, got.stdout, got.stderr)
			}
			report, err := os.ReadFile(res.Report)
			if err != nil {
				t.Fatal(err)
			}
			normalized := normalizeReport(string(report))
			path := filepath.Join("testdata", "golden", file+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(normalized), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if normalized != string(want) {
				t.Errorf("report differs from %s (run with -update if the change is intended):\n%s", path, firstDiff(string(want), normalized))
			}
		})
	}
}

var (
	startedLine = regexp.MustCompile(`(?m)^Started:  .*$`)
	elapsedLine = regexp.MustCompile(`(?m)^Elapsed:  .*$`)
	runFolder   = regexp.MustCompile(`\S*outboxlab-(session-|explore)[^/\s]*`)
	splitCounts = regexp.MustCompile(`Worker-A(\s+)\d+,(\s+)Worker-B(\s+)\d+`)
	ranCounts   = regexp.MustCompile(`\[ran [^\]]*\]`)
)

// normalizeReport masks what varies between two honest runs.
func normalizeReport(s string) string {
	s = startedLine.ReplaceAllString(s, "Started:  <wall clock>")
	s = elapsedLine.ReplaceAllString(s, "Elapsed:  <elapsed>")
	s = runFolder.ReplaceAllString(s, "<run folder>")
	s = splitCounts.ReplaceAllString(s, "Worker-A${1}N,${2}Worker-B${3}N")
	s = maskSession21(s) // golden_session21_test.go
	if strings.Contains(s, reports.CountsVaryNote) {
		s = ranCounts.ReplaceAllString(s, "[ran <counts vary by run>]")
	}
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if lines[i] != reports.InterleavedNote {
			continue
		}
		// The column names are kept (their widths follow the varying
		// cells); the body up to the closing border varies.
		if i+3 < len(lines) {
			var cols []string
			for _, c := range strings.Split(strings.Trim(lines[i+2], "| "), "|") {
				cols = append(cols, strings.TrimSpace(c))
			}
			out = append(out, "columns: "+strings.Join(cols, " | "))
			i += 3
		}
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "+") {
			i++
		}
		i++ // the closing border
		out = append(out, "<rows vary by run>")
	}
	return strings.Join(out, "\n")
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return "(no difference found)"
}
