// Command outboxlab runs the transactional-outbox lessons by name and
// writes their reports. See README.md, or run `outboxlab help`
// and `outboxlab help run`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals end a run cleanly: Ctrl-C, kill, and a closed terminal.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := notifyStop(context.Background(), os.Stderr, func() { os.Exit(exitInterrupted) })
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifyStop returns a context cancelled by the first stop signal, so the
// run stops its workers and removes its temporary folder; a second signal
// calls exit at once.
func notifyStop(parent context.Context, stderr io.Writer, exit func()) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "outboxlab: stopped at once (second signal); temporary files may remain")
			exit()
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
