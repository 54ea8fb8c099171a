package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/store"
)

// TestClaimSQLUntrusted runs `run --claim-sql` on files a student should
// not be able to hand in: each is refused with exit 2 and a reason, before
// a report or any file outside the run is written.
func TestClaimSQLUntrusted(t *testing.T) {
	t.Parallel()
	dir, fifo, write := fileMaker(t, "claim.fifo")
	abs := filepath.Join(dir, "evil-run-abs.db")
	uri := filepath.Join(dir, "evil-run-uri.db")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"EmptyClaimSQL", []string{"--claim-sql", ""}, "--claim-sql needs a claim file"},
		{"EmptyClaimSQLEquals", []string{"--claim-sql="}, "--claim-sql needs a claim file"},
		{"EmptyVariant", []string{"--variant", ""}, "--variant needs a name"},
		{"FIFO", []string{"--claim-sql", fifo}, "not a regular file"},
		{"DevZero", []string{"--claim-sql", "/dev/zero"}, "not a regular file"},
		{"Folder", []string{"--claim-sql", dir}, "a folder"},
		{"AttachAbsolute", []string{"--claim-sql", write("abs.sql", "ATTACH '"+abs+"' AS x; "+okUpdate)}, "ATTACH"},
		{"AttachRelative", []string{"--claim-sql", write("rel.sql", okSelect+"; ATTACH 'evil-run-relative.db' AS x")}, "ATTACH"},
		{"AttachURI", []string{"--claim-sql", write("uri.sql", "ATTACH 'file:"+uri+"?mode=rwc' AS x; "+okUpdate)}, "ATTACH"},
		{"DropTable", []string{"--claim-sql", write("drop.sql", "DROP TABLE Payments; "+okUpdate)}, "schema change"},
		{"Oversize", []string{"--claim-sql", write("big.sql", strings.Repeat("-", 1<<20+1))}, "larger than"},
		{"SemicolonInCommentIsNotASplit", []string{"--claim-sql", write("one.sql", okSelect+" -- ; "+okUpdate)},
			"the statement (a file of one statement is read as the claim in one statement): uses :id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "reports")
			o := runCLI(t, append([]string{"run", "session-15-outbox-leasing", "--out", out}, tt.args...)...)
			if o.code != exitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", o.code, o.stderr, tt.want)
			}
			if reps, _ := filepath.Glob(filepath.Join(out, "*", "*.txt")); len(reps) > 0 {
				t.Errorf("a refused run wrote %v", reps)
			}
		})
	}
	for _, evil := range []string{abs, uri, "evil-run-relative.db"} {
		if _, err := os.Stat(evil); err == nil {
			t.Errorf("a refused claim file created %s", evil)
			os.Remove(evil)
		}
	}
}

// TestClaimSQLSemicolonsInside judges a claim whose comments and strings
// hold semicolons: it is split where SQLite would, and passes.
func TestClaimSQLSemicolonsInside(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "claim.sql")
	text := "-- take the oldest; then update it\n" + strings.Replace(okSelect, "LIMIT 1", "AND Payload <> ';' LIMIT 1", 1) + ";\n/* the update; guarded */\n" + okUpdate + ";\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, "run", "session-15-outbox-leasing", "--claim-sql", p, "--out", filepath.Join(t.TempDir(), "r"))
	if o.code != exitOK {
		t.Fatalf("exit %d: %s %s", o.code, o.stdout, o.stderr)
	}
}

// TestClaimSQLRunErrors: with --claim-sql, a run that fails because a claim
// statement could not run (it passed the check on an empty table) is the
// file's fault, exit 2; a run that fails for the lab's own reason, here a
// run folder that cannot be made, is exit 3 like any lab failure.
func TestClaimSQLRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Both statements fail only on message 5, which the run has and the
	// claim file check's rows do not.
	nullStatus := write("null-status.sql", okSelect+";\n"+strings.Replace(okUpdate, "Status = 'Processing',", "Status = CASE WHEN Id = 5 THEN NULL ELSE 'Processing' END,", 1))
	// abs() of the smallest integer overflows; the sort reads every row.
	overflow := write("overflow.sql", "SELECT Id FROM OutboxMessages WHERE abs(-9223372036854775803 - Id) > 0 ORDER BY CreatedAtUtc, Id LIMIT 1;\n"+okUpdate)
	// An UPDATE that moves the claimed message to another Id.
	renumber := write("renumber.sql", okSelect+";\nUPDATE OutboxMessages SET Id = Id + 100 WHERE Id = :id")
	for _, tt := range []struct {
		name, file string
		want       string
	}{
		{"UpdateBreaksConstraint", nullStatus, "its second statement failed in the run"},
		{"UpdateRenumbers", renumber, "its second statement failed in the run: it changed 1 row, but message 1 no longer exists"},
		{"SelectOverflows", overflow, "its first statement failed in the run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runCLI(t, "run", "session-15-outbox-leasing", "--claim-sql", tt.file, "--out", filepath.Join(t.TempDir(), "r"))
			if o.code != exitUsage || !strings.Contains(o.stderr, "--claim-sql") || !strings.Contains(o.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2, blaming the %s", o.code, o.stderr, tt.want)
			}
		})
	}
	t.Run("LabFailure", func(t *testing.T) {
		t.Parallel()
		notAFolder := write("not-a-folder", "x")
		o := runCLIWith(t, &settings{now: time.Now, tempRoot: notAFolder}, "run", "session-15-outbox-leasing",
			"--claim-sql", filepath.Join("..", "..", "examples", "claim-lesson.sql"), "--out", filepath.Join(t.TempDir(), "r"))
		if o.code != exitFailed || strings.Contains(o.stderr, "--claim-sql") {
			t.Errorf("exit %d, stderr %q; want 3, not blaming the file", o.code, o.stderr)
		}
	})
}

// TestClaimSQLRenumberedMessageIsJudged: a claim whose UPDATE OR REPLACE
// moves another worker's claimed message onto the Id it selected (the
// replaced row is deleted, and only one row counts as changed) leaves that
// worker finalizing a message that no longer exists. The refusal is the
// file's to be judged on: the run fails its checks (exit 1). Before the
// fix the finalization's read-back got sql.ErrNoRows, and the run ended
// as the lab's failure (exit 3, "the run could not complete").
func TestClaimSQLRenumberedMessageIsJudged(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "steal.sql")
	text := okSelect + ";\nUPDATE OR REPLACE OutboxMessages SET Id = :id, Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until\n" +
		"WHERE Id = coalesce((SELECT max(Id) FROM OutboxMessages WHERE Id < :id AND Status = 'Processing'), :id)\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runCLI(t, "run", "session-15-outbox-leasing", "--claim-sql", p, "--out", filepath.Join(t.TempDir(), "r"))
	if o.code != exitCheckFailed || !strings.Contains(o.stdout+o.stderr, "FAILED") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 with the run's failed checks", o.code, o.stdout, o.stderr)
	}
}

// TestLoadSlotFile: the file loader serves any slot, not only the claim.
// For a one-statement ack slot declared here (an UPDATE of outbox_events),
// the lesson's statement loads; a file that is not a regular file, is too
// large, holds two statements or one SQLite refuses is refused, naming why,
// as a *store.SlotFileError or errUnreadable (the file's fault).
func TestLoadSlotFile(t *testing.T) {
	t.Parallel()
	ack := store.Slot{Name: "ack", Shapes: []store.Shape{{Kind: store.KindUpdate, Table: "outbox_events", Params: []string{"id", "token", "now"}}},
		Schema: []store.Migration{store.RelayEvents}, Samples: map[string]any{"id": "E-1", "token": int64(1), "now": int64(5)}}
	dir, fifo, write := fileMaker(t, "ack.fifo")
	lesson := store.CompleteWithToken.SQL
	for _, tt := range []struct {
		name, path, want string // want "" loads
	}{
		{"Lesson", write("ok.sql", "-- the ack\n"+lesson+";\n"), ""},
		{"FIFO", fifo, "not a regular file"},
		{"Folder", dir, "a folder"},
		{"Oversize", write("big.sql", strings.Repeat("-", 1<<20+1)), "larger than"},
		{"TwoStatements", write("two.sql", lesson+"; "+lesson), "must hold one statement (an UPDATE of outbox_events that writes nothing else); found 2"},
		{"Attach", write("attach.sql", "ATTACH '"+filepath.Join(dir, "evil.db")+"' AS x"), "the statement: must be an UPDATE of outbox_events that writes nothing else; SQLite's authorizer refused ATTACH"},
		{"Pragma", write("pragma.sql", "PRAGMA journal_mode = DELETE"), "refused PRAGMA"},
		{"ClaimsInstead", write("select.sql", "SELECT event_id FROM outbox_events WHERE event_id = :id"), "compiled it to no update"},
		{"UnknownParameter", write("param.sql", "UPDATE outbox_events SET locked_by = :worker WHERE event_id = :id"), "uses :worker; this statement gets only :id, :token and :now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := loadSlotFile(context.Background(), ack, tt.path, false)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "" && (len(f.Texts) != 1 || f.Texts[0] != lesson):
				t.Fatalf("texts %q, want the lesson's statement without its comment", f.Texts)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			case tt.want != "" && !errors.As(err, new(*store.SlotFileError)) && !errors.Is(err, errUnreadable):
				t.Fatalf("err = %T %v, want the file's fault", err, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "evil.db")); err == nil {
		t.Error("a refused file's ATTACH created a database")
	}
}

// fileMaker makes a folder with a FIFO named fifoName in it, and returns
// the folder, the FIFO's path and a function that writes a file there.
func fileMaker(t *testing.T, fifoName string) (dir, fifo string, write func(name, text string) string) {
	t.Helper()
	dir = t.TempDir()
	fifo = filepath.Join(dir, fifoName)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	write = func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return dir, fifo, write
}
