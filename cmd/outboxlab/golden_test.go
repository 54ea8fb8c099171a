package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

// goldenRuns are the reports kept as golden files: every scenario as
// designed, plus the variants it marks Golden (their report teaches
// something of its own), each with the lesson's GoldenFlags.
func goldenRuns() []goldenRun {
	var runs []goldenRun
	for _, sc := range scenarios.All() {
		runs = append(runs, goldenRun{sc.Name, "", sc.GoldenFlags})
		for _, v := range sc.Variants {
			if v.Golden {
				runs = append(runs, goldenRun{sc.Name, v.Name, sc.GoldenFlags})
			}
		}
	}
	return runs
}

// goldenRun is one run whose report is a golden file.
type goldenRun struct {
	scenario, variant string
	flags             []string
}

// TestGoldenReports runs each scenario through the CLI and compares its
// report with testdata/golden after normalizing what legitimately varies:
// wall-clock time, temporary paths, and tables marked as interleaved: the
// cells of the columns such a table names as varying, and the order of its
// rows (all its rows when it names none).
// Refresh with: go test ./cmd/outboxlab -run TestGoldenReports -update
func TestGoldenReports(t *testing.T) {
	t.Parallel()
	for _, run := range goldenRuns() {
		name, variant := run.scenario, run.variant
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
			args = append(args, run.flags...)
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

// databaseField is the report's Database field with the lines it wraps
// onto: a temporary path of varying length moves its line breaks.
var databaseField = regexp.MustCompile(`(?m)^Database: .*(\n {10}.*)*`)

// normalizeReport masks what varies between two honest runs.
func normalizeReport(s string) string {
	s = databaseField.ReplaceAllStringFunc(s, func(f string) string {
		path, rest, _ := strings.Cut(strings.TrimPrefix(f, "Database: "), " (")
		path = strings.Join(strings.Fields(path), "") // a path too long for its line is cut without a blank
		if rest != "" {
			rest = " (" + strings.Join(strings.Fields(rest), " ")
		}
		return "Database: " + path + rest
	})
	s = startedLine.ReplaceAllString(s, "Started:  <wall clock>")
	s = elapsedLine.ReplaceAllString(s, "Elapsed:  <elapsed>")
	s = runFolder.ReplaceAllString(s, "<run folder>")
	s = splitCounts.ReplaceAllString(s, "Worker-A${1}N,${2}Worker-B${3}N")
	s = maskSession21(s) // golden_session21_test.go
	if strings.Contains(s, reports.CountsVaryMarker) {
		s = ranCounts.ReplaceAllString(s, "[ran <counts vary by run>]")
	}
	lines := strings.Split(s, "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if lines[i] != reports.InterleavedNote {
			continue
		}
		varying := varyingColumns(lines, i+1)
		if varying != nil {
			i++
			out = append(out, lines[i])
		}
		// lines[i+1] is the top border, then the header (a narrowed column
		// wraps its name over several lines) and the border under it; the
		// body runs to the closing border.
		if i+3 >= len(lines) {
			continue
		}
		i += 2
		cols := tableCells(lines[i])
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "+") {
			i++
			for c, more := range rowCells(lines[i]) {
				if c < len(cols) && more != "" {
					cols[c] = strings.TrimSpace(cols[c] + " " + more)
				}
			}
		}
		out = append(out, "columns: "+strings.Join(cols, " | "))
		i++
		var body []string
		for i+1 < len(lines) && !strings.HasPrefix(lines[i+1], "+") {
			i++
			body = append(body, lines[i])
		}
		i++ // the closing border
		if varying == nil {
			out = append(out, "<rows vary by run>")
			continue
		}
		out = append(out, maskVarying(cols, body, varying)...)
	}
	return strings.Join(out, "\n")
}

// varyingColumns reads the line at i that names a table's varying columns
// (see reports.VaryingColumnsLine); nil if there is none.
func varyingColumns(lines []string, i int) map[string]bool {
	if i >= len(lines) || !strings.HasPrefix(lines[i], reports.VaryingColumnsPrefix) {
		return nil
	}
	list := strings.TrimSuffix(strings.TrimPrefix(lines[i], reports.VaryingColumnsPrefix), reports.VaryingColumnsSuffix)
	varying := map[string]bool{}
	for _, c := range strings.Split(list, ", ") {
		varying[c] = true
	}
	return varying
}

// tableCells splits one text line of a table into its trimmed cells.
// rowCells is the cells of one line of a table, by position: an empty
// cell stays in its column.
func rowCells(line string) []string {
	parts := strings.Split(line, "|")
	if len(parts) < 2 {
		return nil
	}
	var cells []string
	for _, c := range parts[1 : len(parts)-1] {
		cells = append(cells, strings.TrimSpace(c))
	}
	return cells
}

func tableCells(line string) []string {
	var cells []string
	for _, c := range strings.Split(strings.Trim(line, "| "), "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	return cells
}

// maskVarying masks the varying cells of a table's body and sorts its rows,
// whose order varies too: what is left is what every run must print. A
// row wrapped over several lines is joined first: a row's first line has
// every cell filled (an empty value prints as "-"), a continuation line
// does not. Cells are joined without padding, since a varying cell's width
// moves the columns.
func maskVarying(cols, body []string, varying map[string]bool) []string {
	var rows [][]string
	for _, line := range body {
		cells := rowCells(line)
		if len(rows) == 0 || !slices.Contains(cells, "") {
			rows = append(rows, cells)
			continue
		}
		last := rows[len(rows)-1]
		for j, c := range cells {
			if c != "" && j < len(last) {
				last[j] += " " + c
			}
		}
	}
	var out []string
	for _, row := range rows {
		for j := range row {
			if j < len(cols) && varying[cols[j]] {
				row[j] = "<varies>"
			}
		}
		out = append(out, "row: "+strings.Join(row, " | "))
	}
	slices.Sort(out)
	return out
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
