package main

import (
	"context"
	"io"
	"syscall"
	"testing"
)

// TestSignalHangupStopsLikeInterrupt: SIGHUP cancels the run's context as
// SIGINT does, and a second signal exits at once.
func TestSignalHangupStopsLikeInterrupt(t *testing.T) {
	exited := make(chan struct{})
	ctx, stop := notifyStop(context.Background(), io.Discard, func() { close(exited) })
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-exited
}
