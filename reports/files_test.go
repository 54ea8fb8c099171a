package reports

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteNewFullDiskLeavesNothing: a report that cannot be written whole
// leaves no file, truncated or empty, and no temporary file.
func TestWriteNewFullDiskLeavesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Session-15")
	saved := writeData
	t.Cleanup(func() { writeData = saved })
	writeData = func(f *os.File, data []byte) (int, error) {
		n, _ := f.Write(data[:len(data)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	_, err := WriteNew(filepath.Join(dir, "report.txt"), []byte("a report of some length\n"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC", err)
	}
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		t.Errorf("left behind: %s", e.Name())
	}
}

// TestWriteNewNeverOverwrites: an existing report keeps its bytes; the new
// one takes the next name, and no temporary file remains.
func TestWriteNewNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(path, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := WriteNew(path, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "r-2.txt") {
		t.Errorf("wrote %s, want r-2.txt", got)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Errorf("the first report now holds %q", b)
	}
	if b, _ := os.ReadFile(got); string(b) != "second" {
		t.Errorf("the new report holds %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d files in the folder, want 2", len(entries))
	}
	if st, err := os.Stat(got); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", st.Mode(), err)
	}
}
