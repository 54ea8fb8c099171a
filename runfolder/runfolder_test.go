package runfolder

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/outboxlab/outboxlab/runfolder/runfoldertest"
)

// deadPid is above the kernel's largest pid (at most 2^22), so no process
// can have it.
const deadPid = 1 << 30

// fakeFolder makes root/name with a marker naming pid on host, made at made.
func fakeFolder(t *testing.T, root, name string, pid int, host string, made time.Time) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "outboxlab.db"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid != 0 {
		marker := filepath.Join(dir, Marker)
		if err := os.WriteFile(marker, []byte("pid "+strconv.Itoa(pid)+"\nhost "+host+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(marker, made, made); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSweep: only a marked folder of this host, whose process is gone and
// which is older than the minimum age, is removed.
func TestSweep(t *testing.T) {
	t.Parallel()
	if Alive(deadPid) {
		t.Skipf("pid %d exists?", deadPid)
	}
	root := t.TempDir()
	host, _ := os.Hostname()
	now := time.Now()
	old := now.Add(-2 * time.Minute)
	orphan := fakeFolder(t, root, "outboxlab-bench-1", deadPid, host, old)
	keep := map[string]string{
		"no marker (a kept database)": fakeFolder(t, root, "outboxlab-session-15-x-2", 0, host, old),
		"owner alive":                 fakeFolder(t, root, "outboxlab-session-15-x-3", os.Getpid(), host, old),
		"too young":                   fakeFolder(t, root, "outboxlab-bench-4", deadPid, host, now.Add(-10*time.Second)),
		"another host":                fakeFolder(t, root, "outboxlab-bench-5", deadPid, host+"-other", old),
		"not a run folder":            fakeFolder(t, root, "someone-else-6", deadPid, host, old),
	}
	swept := Sweep(root, time.Minute, now)
	if len(swept) != 1 || swept[0].Dir != orphan || swept[0].Pid != deadPid || swept[0].Err != nil || swept[0].Bytes < 4096 {
		t.Fatalf("swept %+v, want only %s", swept, orphan)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphan folder still there: %v", err)
	}
	for why, dir := range keep {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: %s was removed: %v", why, dir, err)
		}
	}
}

// TestNewMarksAndRemoves: a folder that is not kept carries the marker
// naming this process, and done removes it; a kept one has no marker.
func TestNewMarksAndRemoves(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir, done, err := New(root, "outboxlab-test-", false, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	pid, host, _, ok := owner(dir)
	if me, _ := os.Hostname(); !ok || pid != os.Getpid() || host != me {
		t.Fatalf("marker: pid %d host %q ok %v", pid, host, ok)
	}
	done()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("done left %s: %v", dir, err)
	}
	kept, done, err := New(root, "outboxlab-test-", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	done()
	if _, _, _, ok := owner(kept); ok {
		t.Error("a kept folder has an owner marker, so a sweep could take it")
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("kept folder: %v", err)
	}
}

// TestRemoveWarns: a folder that cannot be removed is reported, not ignored.
func TestRemoveWarns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runfoldertest.Unremovable(t, dir)
	var got []error
	Remove(dir, func(err error) { got = append(got, err) })
	if len(got) != 1 || !strings.Contains(got[0].Error(), "could not remove the temporary folder "+dir) {
		t.Fatalf("warnings %v", got)
	}
}

// TestAliveZombie: a child that has exited but is not yet reaped counts as
// gone, though signal 0 still reaches it.
func TestAliveZombie(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	// waitid(P_PID, pid, WEXITED|WNOWAIT) returns once the child has exited
	// and leaves it unreaped: a zombie.
	var info [128]byte
	const pPid, wExited, wNoWait = 1, 4, 0x1000000
	if _, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPid, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0); errno != 0 {
		t.Skipf("waitid: %v", errno)
	}
	if !zombie(pid) {
		t.Skip("no /proc zombie state here")
	}
	if Alive(pid) {
		t.Errorf("zombie %d counted as alive", pid)
	}
	if !Alive(os.Getpid()) {
		t.Error("this process counted as gone")
	}
}
