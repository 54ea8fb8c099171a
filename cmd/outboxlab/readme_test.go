package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readmeExcerptIntro is the README's line above its excerpt of a report.
const readmeExcerptIntro = "The first screen of a real `session-15-competing-workers-no-claim` report:"

// firstScreen is a golden report up to the end of its checks table: what
// a student sees first.
func firstScreen(report string) string {
	lines := strings.Split(report, "\n")
	borders := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "== Checks") {
			borders = 1
		}
		if borders > 0 && strings.HasPrefix(l, "+-") {
			if borders++; borders == 4 { // top, under the header, bottom
				return strings.Join(lines[:i+1], "\n") + "\n"
			}
		}
	}
	return report
}

// TestREADMEShowsTheGoldenFirstScreen: the README's excerpt of a report is
// the golden report's first screen, byte for byte, so it cannot lag the
// report (it once lacked a check). -update rewrites it.
func TestREADMEShowsTheGoldenFirstScreen(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "session-15-competing-workers-no-claim.txt"))
	if err != nil {
		t.Fatal(err)
	}
	readmePath := filepath.Join("..", "..", "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	at := strings.Index(text, readmeExcerptIntro+"\n\n```\n")
	if at < 0 {
		t.Fatalf("README.md has no excerpt introduced by %q", readmeExcerptIntro)
	}
	start := at + len(readmeExcerptIntro) + len("\n\n```\n")
	end := start + strings.Index(text[start:], "```\n")
	want := firstScreen(string(golden))
	if *update {
		if err := os.WriteFile(readmePath, []byte(text[:start]+want+text[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := text[start:end]; got != want {
		t.Errorf("README.md's excerpt differs from the golden report's first screen (go test ./cmd/outboxlab -run "+
			"'TestGoldenReports|TestREADME' -update)\nREADME:\n%s\ngolden:\n%s", got, want)
	}
}
