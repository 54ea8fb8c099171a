package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalWait bounds each wait of the signal test: a signal the handler
// missed fails the test in seconds, not at the package timeout.
const signalWait = 5 * time.Second

// TestSignalsStopTheRun: each stop signal (SIGINT, SIGTERM, SIGHUP: a
// closed terminal) cancels the run's context and nothing else; a second
// signal exits at once, saying so on stderr. The test runs alone (no
// t.Parallel): the signals go to the whole test process.
func TestSignalsStopTheRun(t *testing.T) {
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			exited := make(chan struct{})
			var stderr bytes.Buffer
			ctx, stop := notifyStop(context.Background(), &stderr, func() { close(exited) })
			defer stop()
			if ctx.Err() != nil {
				t.Fatal("the context was cancelled before any signal")
			}
			send(t, sig)
			select {
			case <-ctx.Done():
			case <-time.After(signalWait):
				t.Fatalf("%v did not cancel the run's context within %v", sig, signalWait)
			}
			select {
			case <-exited:
				t.Fatalf("one %v exited at once; it must only stop the run", sig)
			case <-time.After(50 * time.Millisecond):
			}
			send(t, os.Interrupt) // the second signal, still caught by the handler
			select {
			case <-exited:
			case <-time.After(signalWait):
				t.Fatalf("a second signal did not exit within %v", signalWait)
			}
			if !strings.Contains(stderr.String(), "stopped at once (second signal)") {
				t.Errorf("stderr %q does not say why it stopped at once", stderr.String())
			}
		})
	}
}

// TestStopWithoutSignal: a run that ends by itself cancels its context
// and never calls exit.
func TestStopWithoutSignal(t *testing.T) {
	exited := false
	ctx, stop := notifyStop(context.Background(), &bytes.Buffer{}, func() { exited = true })
	stop()
	if ctx.Err() == nil {
		t.Error("stop did not cancel the context")
	}
	if exited {
		t.Error("stop called exit")
	}
}

// send delivers sig to this process.
func send(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := syscall.Kill(syscall.Getpid(), sig.(syscall.Signal)); err != nil {
		t.Fatal(err)
	}
}
