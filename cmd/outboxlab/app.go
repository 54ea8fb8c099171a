package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/lesson"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/runfolder"
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

// Error is the reason, as one line for stderr.
func (e *usageError) Error() string { return e.err.Error() }

// Unwrap returns the reason, so errors.Is and errors.As see through it.
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usage error with a formatted reason.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errChecksFailed means the runs completed but a check failed: exit 1.
var errChecksFailed = errors.New("some checks failed")

// settings are what surrounds one invocation of the program: the clock of
// report timestamps, the folder runs make their temporary folders in, and
// where warnings go. Tests give each invocation its own, so CLI tests run
// in parallel without setting TMPDIR or a package variable.
type settings struct {
	now      func() time.Time // the wall clock of report timestamps
	tempRoot string           // parent of the run folders; "" is the system's temporary folder
	// ceilingRound, when set, shortens bench's ceiling measurement to two
	// rounds of this length (tests: the matrix is what they check).
	ceilingRound time.Duration

	// childTimeout, when set, bounds each wait for a child process's
	// report, answer or exit with run --processes (tests: a child that
	// never answers fails them in seconds); 0 is proc.DefaultTimeout.
	childTimeout time.Duration

	// fileReport, when set, files a grade's reports and summary instead
	// of [reports.WriteNew] (tests: a full disk).
	fileReport func(path string, data []byte) (string, error)

	mu     sync.Mutex // warnings may come from runs graded at once
	stderr io.Writer
}

// warn prints what went wrong without spoiling the run, one line each.
func (s *settings) warn(err error) { s.note("warning: " + err.Error()) }

// note prints one line on stderr.
func (s *settings) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintln(s.stderr, "outboxlab: "+oneLine(msg))
}

// options are the lessons' defaults, run in s's temporary folder.
func (s *settings) options() lesson.Options {
	o := lesson.DefaultOptions()
	o.TempRoot, o.Warn, o.ChildTimeout = s.tempRoot, s.warn, s.childTimeout
	return o
}

// orphanAge is how old a run folder whose process is gone must be before a
// start sweeps it.
const orphanAge = time.Minute

// sweep removes the run folders left by processes that are gone (killed
// with SIGKILL, or a crash), and says so.
func (s *settings) sweep() {
	for _, f := range runfolder.Sweep(s.tempRoot, orphanAge, s.now()) {
		if f.Err != nil {
			s.warn(fmt.Errorf("could not remove %s, left by process %d, which is gone: %w", f.Dir, f.Pid, f.Err))
			continue
		}
		s.note(fmt.Sprintf("removed %s (%.1f MB), left by process %d, which is gone", f.Dir, float64(f.Bytes)/1e6, f.Pid))
	}
}

// run is the whole program: it parses args, runs the command and returns
// the exit code. Only main calls os.Exit.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, &settings{now: time.Now}, args, stdout, stderr)
}

// runWith is run in the given settings.
func runWith(ctx context.Context, s *settings, args []string, stdout, stderr io.Writer) int {
	s.stderr = stderr
	if !isWorker(args) {
		s.sweep()
	}
	unknownCommand := false
	app := newApp(s, stdout, stderr)
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
		var kept *runfolder.Kept
		if errors.As(err, &kept) {
			fmt.Fprintln(stderr, "outboxlab: interrupted; workers stopped; the last run's database is kept in "+kept.Dir)
			return exitInterrupted
		}
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

// newApp builds the CLI: its commands, and run deciding every exit code.
func newApp(s *settings, stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "outboxlab",
		Usage: "reproduce the outbox-worker race on a real SQLite database, and the designs that make it safe",
		Description: "Run the course's scenarios by name; each run writes a text report with the schema, the timeline,\n" +
			"separate ledgers and PASS/FAIL checks. Exit code: 0 every check passed, 1 a check failed, 2 bad input,\n" +
			"3 the lab itself failed, 130 interrupted.",
		Writer:      stdout,
		ErrWriter:   stderr,
		HideVersion: true,
		Suggest:     true,
		Commands: []*cli.Command{listCommand(), describeCommand(), runCommand(s), inspectCommand(), benchCommand(s), gradeCommand(s), exerciseCommand(), challengeCommand(s), courseCommand(),
			versionCommand(s), workerCommand()},
		Flags: []cli.Flag{&cli.BoolFlag{Name: "version", Usage: "print the lab's version and the SQLite and PostgreSQL versions it runs"}},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				return printVersion(c.Context, s, c.App.Writer, "")
			}
			if c.NArg() > 0 && c.App.CommandNotFound != nil {
				c.App.CommandNotFound(c, c.Args().First()) // an App with an Action no longer calls it itself
				return nil
			}
			return cli.ShowAppHelp(c)
		},
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run decides the exit code
	}
}

// commandNames lists app's commands, for the unknown-command message.
func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.Commands {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// onUsageError turns urfave/cli's flag errors into usage errors (exit 2).
func onUsageError(_ *cli.Context, err error, _ bool) error {
	return &usageError{err}
}

// oneLine folds s onto one line, its runs of white space made one space,
// and escapes the control characters left ([reports.Printable]): an error
// may quote a file's name or its SQL.
func oneLine(s string) string {
	return reports.Printable(strings.Join(strings.Fields(s), " "))
}
