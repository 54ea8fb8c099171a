package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// courseDocs is the generated copy of the catalogue in the repository.
var courseDocs = filepath.Join("..", "..", "docs", "course")

// TestCourseIsCurrent: docs/course is exactly what `outboxlab course`
// writes now, file for file, so the catalogue in the repository cannot lag
// the lessons. -update rewrites it (and removes a page no lesson has).
func TestCourseIsCurrent(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "course")
	if o := runCLI(t, "course", "--out", out); o.code != exitOK {
		t.Fatalf("course --out: exit %d %s", o.code, o.stderr)
	}
	want := readPages(t, out)
	if *update {
		if err := os.MkdirAll(courseDocs, 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range readPages(t, courseDocs) {
			if _, ok := want[name]; !ok {
				if err := os.Remove(filepath.Join(courseDocs, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, text := range want {
			if err := os.WriteFile(filepath.Join(courseDocs, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	got := readPages(t, courseDocs)
	for _, name := range sortedKeys(want) {
		switch text, ok := got[name]; {
		case !ok:
			t.Errorf("docs/course has no %s (go test ./cmd/outboxlab -run TestCourseIsCurrent -update)", name)
		case text != want[name]:
			t.Errorf("docs/course/%s differs from what `outboxlab course` writes now (go test ./cmd/outboxlab -run "+
				"TestCourseIsCurrent -update):\n%s", name, firstDiff(want[name], text))
		}
	}
	for _, name := range sortedKeys(got) {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/course/%s is no page of the course (go test ./cmd/outboxlab -run TestCourseIsCurrent -update)", name)
		}
	}
}

// readPages reads every file of dir (none when it does not exist): name -> text.
func readPages(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		pages[e.Name()] = string(data)
	}
	return pages
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestCourseCommand: `course` writes into a new or empty folder only, and
// refuses bad input with exit 2 and a reason, writing nothing.
func TestCourseCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		args   func(t *testing.T, root string) []string
		code   int
		stderr string // a part of the message, for a refusal
	}{
		{"new folder", func(_ *testing.T, root string) []string {
			return []string{"course", "--out", filepath.Join(root, "new", "course")}
		}, exitOK, ""},
		{"empty folder", func(t *testing.T, root string) []string {
			return []string{"course", "--out", root}
		}, exitOK, ""},
		{"folder not empty", func(t *testing.T, root string) []string {
			if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"course", "--out", root}
		}, exitUsage, "exists and is not empty"},
		{"a file", func(t *testing.T, root string) []string {
			path := filepath.Join(root, "README.md")
			if err := os.WriteFile(path, []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"course", "--out", path}
		}, exitUsage, "is a file, not a folder"},
		{"under a file", func(t *testing.T, root string) []string {
			path := filepath.Join(root, "README.md")
			if err := os.WriteFile(path, []byte("mine\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"course", "--out", filepath.Join(path, "course")}
		}, exitUsage, "cannot be used: not a directory"},
		{"no --out", func(*testing.T, string) []string { return []string{"course"} }, exitUsage, "course needs --out DIR"},
		{"empty --out", func(*testing.T, string) []string { return []string{"course", "--out", ""} }, exitUsage, "course needs --out DIR"},
		{"an argument", func(_ *testing.T, root string) []string {
			return []string{"course", "--out", root, "session-15-outbox-leasing"}
		}, exitUsage, "course takes no arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			o := runCLI(t, c.args(t, root)...)
			if o.code != c.code || !strings.Contains(o.stderr, c.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d saying %q", o.code, o.stderr, c.code, c.stderr)
			}
			if c.code == exitOK {
				if !strings.HasPrefix(o.stdout, "wrote the course catalogue: ") {
					t.Errorf("stdout %q", o.stdout)
				}
				return
			}
			if strings.Contains(o.stderr, "panic") || strings.Count(strings.TrimSpace(o.stderr), "\n") > 0 {
				t.Errorf("stderr is not one line of reason: %q", o.stderr)
			}
			if data, err := os.ReadFile(filepath.Join(root, "README.md")); err == nil && string(data) != "mine\n" {
				t.Errorf("README.md was overwritten")
			}
		})
	}
}
