package progress

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProgressPlainWhenNotATerminal: written to a file or a buffer, the
// progress is plain lines with no carriage return; to a terminal it is one
// line redrawn with \r.
func TestProgressPlainWhenNotATerminal(t *testing.T) {
	t.Parallel()
	file, err := os.Create(filepath.Join(t.TempDir(), "progress.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var buf strings.Builder
	for _, w := range []interface{ Write([]byte) (int, error) }{&buf, file} {
		p := New(w, "bench")
		if p.tty {
			t.Fatalf("%T counted as a terminal", w)
		}
		p.SetCell("cell 1")
		p.Phase("seeding", 0, 100)
		for i := int64(1); i <= 100; i++ {
			p.Set(i) // within plainEvery of the phase's line: no more lines
		}
		p.Phase("draining", 0, 100)
		p.Finish()
	}
	data, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{buf.String(), string(data)} {
		if strings.Contains(got, "\r") {
			t.Errorf("carriage return in plain progress: %q", got)
		}
		want := "bench: cell 1: seeding 0/100 (0%)\nbench: cell 1: draining 0/100 (0%)\n"
		if got != want {
			t.Errorf("plain progress %q, want %q", got, want)
		}
	}
	p := &Line{w: &buf, prefix: "bench", tty: true}
	buf.Reset()
	p.SetCell("cell 1")
	p.Phase("seeding", 0, 10)
	p.Set(5)
	p.Finish()
	if !strings.HasPrefix(buf.String(), "\rbench: cell 1: seeding 0/10") || strings.Contains(buf.String(), "\n") {
		t.Errorf("terminal progress %q: want one line redrawn with \\r", buf.String())
	}
}

// TestProgressWithoutTotal: work of unknown size (the explorer's
// orderings) shows its count alone; a nil line does nothing.
func TestProgressWithoutTotal(t *testing.T) {
	var buf strings.Builder
	p := New(&buf, "explore")
	p.Phase("orderings explored", 0, 0)
	p.Finish()
	if got, want := buf.String(), "explore: orderings explored 0\n"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	var none *Line
	none.Phase("nothing", 0, 1)
	none.Set(1)
	none.Finish()
}

// TestIsTerminal: neither a regular file nor /dev/null, a character
// device that is no terminal, gets the status line.
func TestIsTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, w := range map[string]*os.File{"/dev/null": devNull, "a regular file": file} {
		if IsTerminal(w) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}
