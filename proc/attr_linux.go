package proc

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// childAttributes asks Linux to kill a child with SIGKILL if the lab dies
// first (even by SIGKILL), so no child outlives its run.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processStopped reports whether process pid is stopped (state T in
// /proc/PID/stat); known is false where that cannot be read.
func processStopped(pid int) (stopped, known bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, false
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses: read after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false, false
	}
	return b[i+2] == 'T', true
}
