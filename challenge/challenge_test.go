package challenge_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/lab"
)

// goRelay is the reference relay in Go, built once for the package's tests.
var goRelay string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outboxlab-relay-go-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goRelay = filepath.Join(dir, "relay-go")
	build := exec.Command("go", "build", "-o", goRelay, "../examples/relay-go")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the reference relay:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runSequence runs one sequence of the named challenge with relay.
func runSequence(t *testing.T, name, seq, relay string) *lab.Result {
	t.Helper()
	ch, err := challenge.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ch.Sequence(seq)
	if err != nil {
		t.Fatal(err)
	}
	r, err := challenge.Run(context.Background(), ch, s, challenge.Options{Relay: relay, TempRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGoRelayPassesDay15(t *testing.T) {
	ch, _ := challenge.Lookup("day15-worker")
	for _, s := range ch.Sequences {
		t.Run(s.Name, func(t *testing.T) {
			r := runSequence(t, ch.Name, s.Name, goRelay)
			if !r.Passed() {
				for _, b := range r.BrokenInvariants() {
					t.Error(b)
				}
				for _, tb := range r.Tables {
					if tb.Title == "The program's faults" || tb.Title == "The program's stderr" {
						t.Log(tb.Title, tb.Rows)
					}
				}
				t.Log(r.Verdict)
			}
		})
	}
}
