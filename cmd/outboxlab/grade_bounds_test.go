package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sort127SQL sorts 127 values of 8 MB: each value is within SQLite's
// length limit, the whole needs a gigabyte.
const sort127SQL = `WITH t(x) AS (VALUES (1),(2)), r AS (SELECT a.x FROM t a, t b, t c, t d, t e, t f, t g LIMIT 127)
SELECT count(*) FROM (SELECT zeroblob(8000000) || x AS b FROM r GROUP BY b);
` + okUpdate

// slowOnRunRowsSQL is quick on the claim check's four messages and takes
// minutes as soon as it meets message 5, which only the run has.
const slowOnRunRowsSQL = `SELECT Id FROM OutboxMessages
WHERE (Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))
  AND (Id <> 5 OR (WITH t(x) AS (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10))
                   SELECT count(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i) > 0)
ORDER BY CreatedAtUtc, Id LIMIT 1;
` + okUpdate

// TestGradeBoundsStatements: a claim statement is bounded in memory and
// time in total, not per value, and a statement slow only on the run's
// rows is the file's fault, named, exit 2 (it was exit 3, "context
// deadline exceeded"). The grade runs as a real process so its peak
// memory is its own; the time bound asserted is generous.
func TestGradeBoundsStatements(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	dir := t.TempDir()
	sort127, slow := filepath.Join(dir, "sort127.sql"), filepath.Join(dir, "slow-on-run-rows.sql")
	for p, text := range map[string]string{sort127: sort127SQL, slow: slowOnRunRowsSQL} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "grade", "--jobs", "2", "--format", "json", "--out", t.TempDir(), sort127, slow)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peakKB := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	elapsed := time.Since(started)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage {
		t.Fatalf("%v, want exit %d; stdout %s stderr %s", err, exitUsage, stdout.String(), stderr.String())
	}
	got := byFileName(gradesOf(t, stdout.String()))
	if g := got["sort127.sql"]; !strings.HasPrefix(g.Error, "refused: first statement: ") {
		t.Errorf("sort127.sql: %q, want the first statement refused", g.Error)
	}
	if g := got["slow-on-run-rows.sql"]; !strings.HasPrefix(g.Error, "its first statement failed in the run: ran longer than 2s and was stopped") {
		t.Errorf("slow-on-run-rows.sql: %q, want its first statement stopped in the run", g.Error)
	}
	peakMB := <-peakKB >> 10
	t.Logf("grade: %s, peak memory %d MB", elapsed.Round(time.Millisecond), peakMB)
	if peakMB > 600 {
		t.Errorf("the grade's peak memory was %d MB; a claim's statements may hold %d MiB in all", peakMB, 256)
	}
	if elapsed > time.Minute {
		t.Errorf("the grade took %s", elapsed)
	}

	o := runCLI(t, "run", "session-15-outbox-leasing", "--claim-sql", slow, "--out", t.TempDir())
	if o.code != exitUsage || !strings.Contains(o.stderr, "its first statement failed in the run: ran longer than 2s") {
		t.Errorf("run --claim-sql: exit %d, stderr %q; want 2 naming the first statement", o.code, o.stderr)
	}
}

// unwrapCells joins each row a table wrapped over several lines back into
// one, so a long file name reads as one string whatever the length of the
// folder it is in: a table row whose Verdict cell (the third) is empty
// continues the row above it. The Student and File cells join without a
// space (a name wraps anywhere), the others with one (text wraps at
// spaces). Lines that are not table rows stay as they are.
func unwrapCells(text string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "|")
		continued := len(cells) > 4 && strings.HasPrefix(line, "|") && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "|") &&
			strings.TrimSpace(cells[3]) == ""
		if !continued {
			out = append(out, line)
			continue
		}
		prev := strings.Split(out[len(out)-1], "|")
		for k := 1; k < min(len(cells), len(prev)); k++ {
			if strings.TrimSpace(cells[k]) == "" {
				continue
			}
			sep := " "
			if k <= 2 {
				sep = ""
			}
			prev[k] = " " + strings.TrimSpace(prev[k]) + sep + strings.TrimSpace(cells[k]) + " "
		}
		out[len(out)-1] = strings.Join(prev, "|")
	}
	return strings.Join(out, "\n")
}

// watchPeakRSS samples the process pid's own high-water resident set
// (VmHWM, KiB) until it exits, and sends the last value read. The wait
// status's Maxrss will not do: a child started by vfork inherits its
// parent's high-water mark at exec, so a test binary that grew to a
// gigabyte made the grade look that big.
func watchPeakRSS(pid int) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				out <- peak
				return
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					if kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
						peak = max(peak, kb)
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return out
}
