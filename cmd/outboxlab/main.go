// Command outboxlab runs the transactional-outbox lessons by name and
// writes their reports. See README.md, or run `outboxlab help`
// and `outboxlab help run`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
