package proc

import "syscall"

// childAttributes asks Linux to kill a child with SIGKILL if the lab dies
// first (even by SIGKILL), so no child outlives its run.
func childAttributes() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
