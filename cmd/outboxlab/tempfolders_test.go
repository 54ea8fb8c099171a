package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/runfolder/runfoldertest"

	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/runfolder"
)

// TestStartSweepsOrphanFolders: at start the CLI removes a run folder
// whose marker names a process that cannot exist, says so on stderr, and
// leaves a folder without a marker and one whose process lives.
func TestStartSweepsOrphanFolders(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	host, _ := os.Hostname()
	old := time.Now().Add(-time.Hour)
	folder := func(name string, pid int) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "outboxlab.db"), make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if pid > 0 {
			marker := filepath.Join(dir, runfolder.Marker)
			if err := os.WriteFile(marker, []byte("pid "+strconv.Itoa(pid)+"\nhost "+host+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(marker, old, old); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	orphan := folder("outboxlab-bench-123", 1<<30) // above any pid the kernel gives
	kept := folder("outboxlab-session-15-outbox-leasing-456", 0)
	live := folder("outboxlab-bench-789", os.Getpid())
	o := runCLIWith(t, &settings{now: time.Now, tempRoot: root}, "list")
	if o.code != exitOK || !strings.Contains(o.stderr, "removed "+orphan+" (1.0 MB), left by process 1073741824, which is gone") {
		t.Fatalf("exit %d, stderr %q", o.code, o.stderr)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan folder still there: %v", err)
	}
	for _, dir := range []string{kept, live} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
}

// TestRunFolderRemovalFailureIsLogged: a run folder that cannot be removed
// is a warning on stderr, not silence.
func TestRunFolderRemovalFailureIsLogged(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	s := &settings{now: time.Now, tempRoot: t.TempDir(), stderr: &stderr}
	var runDir string
	sc := &lesson.Scenario{Name: "stuck", Run: func(_ context.Context, env *lesson.Env) (*lab.Result, error) {
		runDir = env.Dir
		runfoldertest.Unremovable(t, env.Dir)
		return &lab.Result{}, nil
	}}
	if _, err := lesson.Execute(context.Background(), sc, "", s.options(), false); err != nil {
		t.Fatal(err)
	}
	want := "outboxlab: warning: could not remove the temporary folder " + runDir
	if !strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}
