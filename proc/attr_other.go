//go:build !linux

package proc

import "syscall"

// childAttributes has nothing to add outside Linux: a child whose parent
// died reads the end of its stdin and exits.
func childAttributes() *syscall.SysProcAttr { return nil }

// processStopped cannot tell outside Linux: known is false.
func processStopped(int) (stopped, known bool) { return false, false }
