package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/internal/pgtest"
)

// TestChallengeCLI: challenge's subcommands from their arguments to their
// exit codes and files, with the Go reference relay and its mistakes.
func TestChallengeCLI(t *testing.T) {
	t.Parallel()
	relay := filepath.Join(t.TempDir(), "relay-go")
	if out, err := exec.Command("go", "build", "-o", relay, "../../examples/relay-go").CombinedOutput(); err != nil {
		t.Fatalf("build the reference relay: %v\n%s", err, out)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  []string
		stderr  []string
		reports int // how many reports it must write under its --out (-1: any)
	}{
		{name: "List", args: []string{"challenge", "list"}, stdout: []string{"day15-worker", "session-15-outbox-leasing"}},
		{name: "Show", args: []string{"challenge", "show", "day15-worker"}, stdout: []string{"stall-past-lease", "stale_writes", "lease_ms = 500", "docs/relay-protocol.md",
			// The tables' statements whole: a semicolon in a comment ends none.
			"TransactionId TEXT, -- the provider's id; NULL unless Paid CreatedAtUtc TEXT NOT NULL, UpdatedAtUtc TEXT NOT NULL );"}},
		{name: "ShowUnknown", args: []string{"challenge", "show", "day15-wroker"}, code: 2, stderr: []string{"did you mean day15-worker"}},
		{name: "RunWithoutRelay", args: []string{"challenge", "run", "day15-worker"}, code: 2, stderr: []string{"--relay must name"}},
		{name: "RunUnknownSequence", args: []string{"challenge", "run", "day15-worker", "--relay", relay, "--sequence", "nope"}, code: 2,
			stderr: []string{`no sequence "nope"`, "two-workers"}},
		{name: "RunBadBound", args: []string{"challenge", "run", "day15-worker", "--relay", relay, "--bound", "-1"}, code: 2, stderr: []string{"--bound must be"}},
		{name: "RunBadReplay", args: []string{"challenge", "run", "day15-worker", "--relay", relay, "--replay", "Worker-B"}, code: 2, stderr: []string{"STEP:INSTANCE"}},
		{name: "RunOutIsAFile", args: []string{"challenge", "run", "day15-worker", "--relay", relay, "--out", notADir}, code: 2, stderr: []string{notADir}},
		// A command line that starts no program stops at the first
		// sequence, its report filed, with the shell's own words.
		{name: "RunNoProgram", args: []string{"challenge", "run", "day15-worker", "--relay", filepath.Join(notADir, "relay")}, code: 2,
			stderr: []string{"your relay never spoke in two-workers", "exited with status 12", "its stderr ends:"}, reports: 1},
		{name: "RunOneSequence", args: []string{"challenge", "run", "day15-worker", "--relay", relay, "--sequence", "crash-after-claim"},
			stdout: []string{"day15-worker.crash-after-claim: PASS", "YOUR RELAY HELD"}, reports: 1},
		// A failing sequence is searched for its shortest failing ordering,
		// filed beside it, with the command that replays it.
		{name: "RunAMistake", args: []string{"challenge", "run", "day15-worker", "--relay", relay + " -mistake zero-rows-ok", "--sequence", "stall-past-lease"},
			code: 1, stdout: []string{"FAIL", "FAILED stale_writes: expected 0, observed 1", "day15-worker.stall-past-lease.ordered: FAIL",
				"The shortest failing ordering of stall-past-lease's requests", "in order without a switch (none)",
				"--sequence stall-past-lease --replay none"}, reports: 2},
		{name: "RunAMistakeWithoutSearch", args: []string{"challenge", "run", "day15-worker", "--relay", relay + " -mistake zero-rows-ok",
			"--sequence", "stall-past-lease", "--bound", "0"}, code: 1, stdout: []string{"FAILED stale_writes"}, reports: 1},
		{name: "ReplayASequence", args: []string{"challenge", "run", "day15-worker", "--relay", relay + " -mistake zero-rows-ok",
			"--sequence", "stall-past-lease", "--replay", "none"}, code: 1,
			stdout:  []string{"day15-worker.stall-past-lease.ordered: FAIL", "FAILED stale_writes", "stall-past-lease in the ordering none (the ordering's table lists its steps and the command that runs it again)"},
			reports: 1},
		// The named sequences may or may not catch the split claim (it is a
		// race); the explorer always does, and says how to replay it (a
		// free run that caught it is searched the same way).
		{name: "Explore", args: []string{"challenge", "run", "day15-worker", "--relay", relay + " -mistake split-claim", "--bound", "1"},
			code: 1, stdout: []string{"6 orderings", "the ordering 5:Worker-B", "day15-worker.two-workers.ordered: FAIL", "--replay 5:Worker-B"},
			reports: -1},
		{name: "Replay", args: []string{"challenge", "run", "day15-worker", "--relay", relay + " -mistake split-claim", "--replay", "5:Worker-B"},
			code: 1, stdout: []string{"day15-worker.two-workers.ordered: FAIL", "FAILED claims_of_owned_messages", "ordering 5:Worker-B"}, reports: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			out := t.TempDir()
			if args[1] == "run" && !contains(args, "--out") {
				args = append(args, "--out", out)
			}
			got := runCLI(t, args...)
			if got.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got.code, tt.code, got.stdout, got.stderr)
			}
			flowed := strings.Join(strings.Fields(got.stdout), " ") // a sentence may wrap
			for _, s := range tt.stdout {
				if !strings.Contains(flowed, s) {
					t.Errorf("stdout lacks %q:\n%s", s, got.stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(got.stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, got.stderr)
				}
			}
			files, _ := filepath.Glob(filepath.Join(out, "Challenges", "*.txt"))
			if tt.reports >= 0 && len(files) != tt.reports {
				t.Errorf("%d reports, want %d", len(files), tt.reports)
			}
			for _, f := range files {
				text, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(string(text), "\n") {
					if len([]rune(line)) > 120 {
						t.Errorf("%s has a line of %d columns: %q", filepath.Base(f), len([]rune(line)), line)
						break
					}
				}
				if !strings.Contains(string(text), "Relay:    "+strings.Fields(tt.args[4])[0]) {
					t.Errorf("%s does not name the relay it judged", filepath.Base(f))
				}
			}
			if left := got.leftovers(); len(left) > 0 {
				t.Errorf("left in the temporary folder: %v", left)
			}
		})
	}
}

// TestGradeRelays: grade --challenge runs each student's folder's relay
// into one table and gradebook: the reference passes, a mistake fails by
// name (with the explorer, also by its shortest failing ordering), a
// program that does not speak the protocol fails program_faults; a folder
// that is not one is bad input.
func TestGradeRelays(t *testing.T) {
	t.Parallel()
	relay := filepath.Join(t.TempDir(), "relay-go")
	if out, err := exec.Command("go", "build", "-o", relay, "../../examples/relay-go").CombinedOutput(); err != nil {
		t.Fatalf("build the reference relay: %v\n%s", err, out)
	}
	class := t.TempDir()
	for student, body := range map[string]string{
		"alice": "exec " + relay,
		"bob":   "exec " + relay + " -mistake no-token",
		"carol": "echo hello",
	} {
		if err := os.MkdirAll(filepath.Join(class, student), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(class, student, "relay.sh"), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	got := runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--out", out, "--format", "csv", "--bound", "0",
		filepath.Join(class, "alice"), filepath.Join(class, "bob"), filepath.Join(class, "carol"))
	if got.code != 1 {
		t.Fatalf("exit %d, want 1 (a relay failed)\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	for _, want := range []string{
		"alice,fenced-relay," + filepath.Join(class, "alice") + ",passed,",
		"bob,fenced-relay," + filepath.Join(class, "bob") + ",failed,expected-after-send: stale_writes",
		"carol,fenced-relay," + filepath.Join(class, "carol") + ",failed,",
		"two-relays: program_faults",
	} {
		if !strings.Contains(got.stdout, strings.Replace(want, "expected-after-send", "expiry-after-send", 1)) {
			t.Errorf("the gradebook lacks %q:\n%s", want, got.stdout)
		}
	}
	// A folder whose relay never speaks is refused, with the reason and
	// its first run's report.
	if err := os.MkdirAll(filepath.Join(class, "dave"), 0o755); err != nil {
		t.Fatal(err)
	}
	got = runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--out", out, "--format", "json", filepath.Join(class, "dave"))
	if gs := gradesOf(t, got.stdout); got.code != 2 || len(gs) != 1 || gs[0].Verdict != "refused" ||
		!strings.Contains(gs[0].Reason, "never spoke in two-relays") || gs[0].Report == "" {
		t.Errorf("a relay that never speaks: exit %d, want 2 and a refused grade with its report\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	// With the explorer, a failed sequence also grades its shortest
	// failing ordering, with the flags that replay it.
	got = runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--out", out, "--format", "json", filepath.Join(class, "bob"))
	if gs := gradesOf(t, got.stdout); got.code != 1 || len(gs) != 1 {
		t.Errorf("bob with the explorer: exit %d, %d grades\n%s\n%s", got.code, len(gs), got.stdout, got.stderr)
	} else {
		found := false
		for _, c := range gs[0].Checks {
			if c.Name == "expiry-after-send.ordered: stale_writes" {
				found = !c.Passed && c.Counterexample == "--sequence expiry-after-send --replay none"
			}
		}
		if !found || !strings.Contains(gs[0].Reason, "(--sequence expiry-after-send --replay none)") {
			t.Errorf("bob's grade lacks expiry-after-send's shortest failing ordering: %+v", gs[0])
		}
		if !strings.Contains(gs[0].Report, "-Ordered-RunReport-") {
			t.Errorf("bob's grade points at %s, not at the report of the ordering that fails", gs[0].Report)
		}
	}
	if bad := runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--out", out, filepath.Join(class, "nobody")); bad.code != 2 ||
		!strings.Contains(bad.stderr, "does not exist") {
		t.Errorf("a missing folder: exit %d, %s", bad.code, bad.stderr)
	}
	if bad := runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--out", out, ""); bad.code != 2 ||
		!strings.Contains(bad.stderr, "an empty folder name") {
		t.Errorf("an empty folder name: exit %d, %s", bad.code, bad.stderr)
	}
	if bad := runCLI(t, "grade", "--challenge", "fenced-relay", "--out", out, filepath.Join(class, "alice")); bad.code != 2 ||
		!strings.Contains(bad.stderr, "--challenge needs --relay") {
		t.Errorf("no relay: exit %d, %s", bad.code, bad.stderr)
	}
}

// TestChallengeOnPostgres: challenge run --db runs a sequence in a
// database of its own on the server, the relay's statements as a role
// that may use the challenge's tables only, which the report names; a
// mistake fails there by the same checks, with its shortest ordering, and
// grades as one under grade --challenge --db; no role or database of the
// run is left afterwards.
func TestChallengeOnPostgres(t *testing.T) {
	t.Parallel()
	// A password the trusting test server ignores: no output may show it.
	url := pgtest.URL(t) + "&password=pw-marker-7q3"
	relay := filepath.Join(t.TempDir(), "relay-go")
	if out, err := exec.Command("go", "build", "-o", relay, "../../examples/relay-go").CombinedOutput(); err != nil {
		t.Fatalf("build the reference relay: %v\n%s", err, out)
	}
	out := t.TempDir()
	pass := runCLI(t, "challenge", "run", "fenced-relay", "--relay", relay, "--sequence", "expiry-after-send", "--db", url, "--out", out)
	if pass.code != 0 || !strings.Contains(pass.stdout, "fenced-relay.expiry-after-send: PASS") {
		t.Fatalf("exit %d\n%s\n%s", pass.code, pass.stdout, pass.stderr)
	}
	fail := runCLI(t, "challenge", "run", "fenced-relay", "--relay", relay+" -mistake no-token", "--sequence", "expiry-after-send", "--db", url, "--out", out)
	if fail.code != 1 || !strings.Contains(fail.stdout, "FAILED stale_writes") || !strings.Contains(fail.stdout, "--sequence expiry-after-send --replay none") {
		t.Fatalf("exit %d, want 1 with stale_writes and its ordering\n%s\n%s", fail.code, fail.stdout, fail.stderr)
	}
	for _, o := range []outcome{pass, fail} {
		if strings.Contains(o.stdout+o.stderr, "pw-marker-7q3") {
			t.Errorf("the output shows the --db login's password:\n%s\n%s", o.stdout, o.stderr)
		}
	}
	if !strings.Contains(fail.stdout, `--db 'postgres://`) {
		t.Errorf("the replay command does not name the server:\n%s", fail.stdout)
	}
	class := filepath.Join(t.TempDir(), "alice")
	if err := os.MkdirAll(class, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(class, "relay.sh"), []byte("#!/bin/sh\nexec "+relay+" -mistake complete-before-send\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	graded := runCLI(t, "grade", "--challenge", "fenced-relay", "--relay", "./relay.sh", "--db", url, "--bound", "0", "--format", "csv",
		"--out", t.TempDir(), class)
	if graded.code != 1 || !strings.Contains(graded.stdout, "two-relays: unsent_completions") {
		t.Errorf("grade --challenge --db: exit %d, want 1 with unsent_completions\n%s\n%s", graded.code, graded.stdout, graded.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(out, "Challenges", "*.txt"))
	if len(files) != 3 {
		t.Fatalf("%d reports, want 3 (the pass, the failure, its ordering)", len(files))
	}
	role := regexp.MustCompile(`your program's statements ran as login role (outboxlab_grader_[0-9a-f]+), rights: USAGE on schema \S+, ` +
		`SELECT, INSERT, UPDATE, DELETE on its tables outbox_events only, in database (outboxlab_grade_[0-9a-f]+)`)
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := role.FindStringSubmatch(strings.Join(strings.Fields(string(text)), " "))
		if m == nil {
			t.Errorf("%s does not name the role the relay ran as", filepath.Base(f))
			continue
		}
		if left := pgtest.Strings(t, url, "SELECT rolname FROM pg_roles WHERE rolname = $1 UNION ALL SELECT datname FROM pg_database WHERE datname = $2",
			m[1], m[2]); len(left) > 0 {
			t.Errorf("%s: left on the server after the run: %v", filepath.Base(f), left)
		}
		if strings.Contains(string(text), "pw-marker-7q3") {
			t.Errorf("%s shows the --db login's password", filepath.Base(f))
		}
	}
}

// TestReplayCommand: the replay command challenge run prints is one line
// when it fits a report's width, else one flag per line with backslashes;
// either way a POSIX shell reads the words it was given, quotes and all.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	long := "/home/a-student-with-a-long-name/courses/distributed-systems/day-15/relays/my-relay --verbose"
	ch, err := challenge.Lookup("day15-worker")
	if err != nil {
		t.Fatal(err)
	}
	ordering, err := challenge.ParseOrdering("5:Worker-B")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, relay, seq, dsn string
		lines                 int
		want                  []string // the words after "outboxlab challenge run day15-worker"
	}{
		{"Short", "python3 relay.py", "two-workers", "", 1, []string{"--relay", "python3 relay.py", "--replay", "5:Worker-B"}},
		{"AnotherSequence", "python3 relay.py", "stall-past-lease", "", 3,
			[]string{"--relay", "python3 relay.py", "--sequence", "stall-past-lease", "--replay", "5:Worker-B"}},
		{"Quotes", `sh -c 'echo "$HOME"'`, "two-workers", "", 1, []string{"--relay", `sh -c 'echo "$HOME"'`, "--replay", "5:Worker-B"}},
		{"Long", long, "two-workers", "", 3, []string{"--relay", long, "--replay", "5:Worker-B"}},
		{"LongOnPostgres", long, "two-workers", "postgres://teacher:secret@db.example:5432/course", 4,
			[]string{"--relay", long, "--replay", "5:Worker-B", "--db", "postgres://teacher:xxxxx@db.example:5432/course"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			replayCommand(&b, ch, tt.relay, tt.seq, ordering, tt.dsn)
			text := strings.TrimSuffix(b.String(), "\n\n")
			lines := strings.Split(text, "\n")
			for _, l := range lines {
				if len(l) > 120 {
					t.Errorf("%d columns: %s", len(l), l)
				}
			}
			if len(lines) != tt.lines {
				t.Errorf("%d lines, want %d:\n%s", len(lines), tt.lines, text)
			}
			command, ok := strings.CutPrefix(text, "  replay it: outboxlab challenge run day15-worker ")
			if !ok {
				t.Fatalf("not a replay command:\n%s", text)
			}
			out, err := exec.Command("sh", "-c", "for w in "+command+"; do printf '%s\\0' \"$w\"; done").Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00"); !slices.Equal(got, tt.want) {
				t.Errorf("a shell reads %q, want %q", got, tt.want)
			}
		})
	}
}
