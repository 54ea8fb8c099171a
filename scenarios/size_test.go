package scenarios

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLessonFileLines is the most lines a non-test file of this package may
// hold: a lesson that outgrows it splits its stages into a file of their
// own (as session21_claims_at_scale_stages.go does), so each file can be
// read in one sitting.
const maxLessonFileLines = 600

// TestLessonFilesStayReadable: no non-test file of this package is longer
// than maxLessonFileLines.
func TestLessonFilesStayReadable(t *testing.T) {
	for f, src := range packageSources(t) {
		if n := bytes.Count(src, []byte("\n")); n > maxLessonFileLines {
			t.Errorf("%s has %d lines, more than %d: move a stage into a file of its own", f, n, maxLessonFileLines)
		}
	}
}

// packageSources reads this package's non-test files, by name.
func packageSources(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string][]byte{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if sources[f], err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	return sources
}
