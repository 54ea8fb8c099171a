package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// Exit codes.
const (
	exitOK          = 0   // every check of every run passed
	exitCheckFailed = 1   // at least one check failed
	exitUsage       = 2   // bad input: usage, unknown names, bad values, unwritable folder
	exitFailed      = 3   // the lab itself could not complete a run (an I/O or database failure)
	exitInterrupted = 130 // stopped by Ctrl-C or SIGTERM
)

// usageError is bad input: exit 2 with a one-line reason.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errChecksFailed means the runs completed but a check failed: exit 1.
var errChecksFailed = errors.New("some checks failed")

// run is the whole program: it parses args, runs the command and returns
// the exit code. Only main calls os.Exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	unknownCommand := false
	app := newApp(stdout, stderr)
	app.CommandNotFound = func(c *cli.Context, name string) {
		fmt.Fprintf(stderr, "outboxlab: unknown command %q; commands: %s\n", name, strings.Join(commandNames(app), ", "))
		unknownCommand = true
	}
	args, err := interspersed(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	var usage *usageError
	switch {
	case unknownCommand:
		return exitUsage
	case err == nil:
		return exitOK
	case errors.Is(err, errChecksFailed):
		return exitCheckFailed
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "outboxlab: interrupted; workers stopped and temporary databases removed (a run with --keep-db keeps its own)")
		return exitInterrupted
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "outboxlab: "+oneLine(err.Error()))
		return exitUsage
	default:
		fmt.Fprintln(stderr, "outboxlab: the run could not complete: "+oneLine(err.Error()))
		return exitFailed
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "outboxlab",
		Usage: "reproduce the outbox-worker race on a real SQLite database, and the designs that make it safe",
		Description: "Run the course's scenarios by name; each run writes a text report with the schema, the timeline,\n" +
			"separate ledgers and PASS/FAIL checks. Exit code: 0 every check passed, 1 a check failed, 2 bad input,\n" +
			"3 the lab itself failed, 130 interrupted.",
		Writer:         stdout,
		ErrWriter:      stderr,
		HideVersion:    true,
		Suggest:        true,
		Commands:       []*cli.Command{listCommand(), describeCommand(), runCommand(), inspectCommand(), benchCommand()},
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the exit code
	}
}

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		names = append(names, c.Name)
	}
	return names
}

// onUsageError turns urfave/cli's flag errors into usage errors (exit 2).
func onUsageError(_ *cli.Context, err error, _ bool) error {
	return &usageError{err}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
