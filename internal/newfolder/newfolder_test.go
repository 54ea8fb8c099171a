package newfolder

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite: a new or empty folder gets every page; a folder that holds
// something, a file, or a path under a file is refused, and nothing is
// written or overwritten.
func TestWrite(t *testing.T) {
	t.Parallel()
	files := []File{{Name: "README.md", Text: "# overview\n"}, {Name: "a.md", Text: "# a\n"}, {Name: "sub/b.md", Text: "# b\n"}}
	cases := []struct {
		name  string
		setup func(t *testing.T, root string) string // returns --out
		want  string                                 // "" for success, else a part of the error
		as    any
	}{
		{"new nested", func(_ *testing.T, root string) string { return filepath.Join(root, "a", "b") }, "", nil},
		{"empty", func(t *testing.T, root string) string { return mkdir(t, filepath.Join(root, "empty")) }, "", nil},
		{"not empty", func(t *testing.T, root string) string {
			dir := mkdir(t, filepath.Join(root, "full"))
			writeFile(t, filepath.Join(dir, "README.md"), "mine\n")
			return dir
		}, "exists and is not empty", new(*NotEmptyError)},
		{"a file", func(t *testing.T, root string) string {
			return writeFile(t, filepath.Join(root, "file"), "mine\n")
		}, "is a file, not a folder", new(*NotAFolderError)},
		{"under a file", func(t *testing.T, root string) string {
			return filepath.Join(writeFile(t, filepath.Join(root, "file"), "mine\n"), "sub")
		}, "cannot be used: not a directory", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := c.setup(t, t.TempDir())
			written, err := Write(dir, "the test", files)
			if c.want == "" {
				if err != nil || len(written) != len(files) {
					t.Fatalf("Write = %v, %v", written, err)
				}
				for _, f := range files {
					if got, err := os.ReadFile(filepath.Join(dir, f.Name)); err != nil || string(got) != f.Text {
						t.Errorf("%s: %q, %v", f.Name, got, err)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || len(written) != 0 {
				t.Fatalf("Write = %v, %v; want an error saying %q and nothing written", written, err, c.want)
			}
			if c.as != nil && !errors.As(err, c.as) {
				t.Errorf("error %T is not a %T", err, c.as)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "README.md")); err == nil && string(got) != "mine\n" {
				t.Errorf("README.md was overwritten: %q", got)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
