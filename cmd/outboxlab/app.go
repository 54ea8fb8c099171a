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
	err := app.RunContext(ctx, interspersed(app, args))
	switch {
	case unknownCommand:
		return exitUsage
	case err == nil:
		return exitOK
	case errors.Is(err, errChecksFailed):
		return exitCheckFailed
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "outboxlab: interrupted; workers stopped, temporary databases removed unless --keep-db")
		return exitInterrupted
	default:
		fmt.Fprintln(stderr, "outboxlab: "+oneLine(err.Error()))
		return exitUsage
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "outboxlab",
		Usage: "reproduce the outbox-worker race on a real SQLite database, and the designs that make it safe",
		Description: "Run the course's scenarios by name; each run writes a text report with the schema, the timeline,\n" +
			"separate ledgers and PASS/FAIL checks. Exit code: 0 every check passed, 1 a check failed, 2 bad input.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideVersion:     true,
		HideHelpCommand: true,
		Suggest:         true,
		Commands:        []*cli.Command{listCommand(), describeCommand(), runCommand(), inspectCommand()},
		OnUsageError:    onUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // run decides the exit code
	}
}

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		names = append(names, c.Name)
	}
	return names
}

func onUsageError(_ *cli.Context, err error, _ bool) error {
	return &usageError{err}
}

// interspersed lets flags follow the positional arguments (`run NAME
// --variant X`), which the standard flag parsing would otherwise treat as
// more names. It moves each flag of the chosen command, with its value,
// ahead of the positionals.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, positional []string
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			positional = append(positional, rest[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && takesValue[name] && i+1 < len(rest) {
			flags = append(flags, rest[i+1])
			i++
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
