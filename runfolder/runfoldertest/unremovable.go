// Package runfoldertest helps tests of run folders: it makes a folder that
// cannot be removed, to show what a failed cleanup reports.
package runfoldertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Unremovable puts a file in dir that cannot be deleted until the test
// ends: a read-only subfolder for a normal user, an immutable file (chattr
// +i) for root. It skips the test where neither works.
func Unremovable(t testing.TB, dir string) {
	t.Helper()
	sub := filepath.Join(dir, "locked")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sub, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(sub, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(sub, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", file).CombinedOutput(); err != nil {
		t.Skipf("root, and chattr +i does not work here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", file).Run() })
}
