package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/challenge"
	"github.com/outboxlab/outboxlab/lab"
	"github.com/outboxlab/outboxlab/reports"
)

func challengeCommand(s *settings) *cli.Command {
	return &cli.Command{
		Name: "challenge",
		Usage: "run your own relay, in any language that speaks JSON lines (docs/relay-protocol.md), under the lab's faults, " +
			"judged on the database it leaves",
		Subcommands: []*cli.Command{
			{
				Name:         "list",
				Usage:        "list the challenges: their lesson, their sequences",
				OnUsageError: onUsageError,
				Action:       challengeListAction,
			},
			{
				Name:         "show",
				Usage:        "print a challenge's brief: what your relay must do, its tables, its settings, its sequences and checks",
				ArgsUsage:    "NAME",
				OnUsageError: onUsageError,
				Action:       challengeShowAction,
			},
			{
				Name:      "run",
				Usage:     "run a challenge's sequences with your relay and write a report per sequence",
				ArgsUsage: "NAME",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "relay", Usage: "your relay: the `COMMAND` line the lab starts once per instance (e.g. \"python3 relay.py\")"},
					&cli.StringFlag{Name: "sequence", Usage: "run only the sequence `NAME` (outboxlab challenge show NAME lists them)"},
					&cli.StringFlag{Name: "out", Value: "run-reports", Usage: "the `FOLDER` for the reports"},
					&cli.BoolFlag{Name: "html", Usage: "also write each report as a self-contained HTML page beside it"},
					&cli.BoolFlag{Name: "keep-db", Usage: "keep each sequence's SQLite database for the sqlite3 shell"},
					&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "stop a sequence after this `DURATION` of real time (such as 30s or 2m)"},
					&cli.StringFlag{Name: "bound", Value: "1", Usage: "after the sequences, explore the orderings of the explored sequence's requests with up to `N` switches (0: none)"},
					&cli.StringFlag{Name: "max-orderings", Value: "400", Usage: "run at most `N` orderings while exploring"},
					&cli.StringFlag{Name: "replay", Usage: "run only the explored sequence, in the `ORDERING` an exploration printed (e.g. 7:Worker-B)"},
				},
				OnUsageError: onUsageError,
				Action:       func(c *cli.Context) error { return challengeRunAction(c, s) },
			},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown challenge subcommand %q; challenge's subcommands: list, show, run", c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		},
	}
}

func challengeListAction(c *cli.Context) error {
	t := lab.Table{Columns: []string{"Challenge", "Lesson", "Sequences", "Title"}}
	for _, ch := range challenge.Catalogue() {
		t.AddRow(ch.Name, ch.Lesson, len(ch.Sequences), ch.Title)
	}
	return reports.WriteTable(c.App.Writer, t)
}

// lookupChallenge reads the NAME argument.
func lookupChallenge(c *cli.Context) (*challenge.Challenge, error) {
	if c.NArg() != 1 {
		return nil, usagef("name one challenge (outboxlab challenge list shows them)")
	}
	ch, err := challenge.Lookup(c.Args().First())
	if err != nil {
		return nil, &usageError{err}
	}
	return ch, nil
}

func challengeShowAction(c *cli.Context) error {
	ch, err := lookupChallenge(c)
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "%s: %s\n\n", ch.Name, ch.Title)
	wrapped(w, "", "Built on "+ch.Lesson+". "+ch.Brief)
	fmt.Fprintf(w, "\nTables your statements may use: %s, as %s's schema makes them:\n\n", strings.Join(ch.Tables, ", "), ch.Lesson)
	for _, stmt := range ch.SchemaStatements() {
		fmt.Fprintln(w, stmt+";")
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Settings in hello's reply: %s\n", settingsText(ch.Settings))
	fmt.Fprintln(w, "\nSequences (each a fresh database and fresh instances of your relay):")
	for _, s := range ch.Sequences {
		wrapped(w, "  ", fmt.Sprintf("%s (%s): %s.", s.Name, strings.Join(s.Instances, ", "), s.About))
	}
	fmt.Fprintln(w, "\nChecks (on the database and the lab's ledgers, after the lab stops your relay):")
	for _, d := range append(slices.Clone(ch.Checks), challenge.WorldChecks...) {
		wrapped(w, "  ", d.Name+": "+d.About+".")
	}
	fmt.Fprintf(w, "\nRun it: outboxlab challenge run %s --relay \"python3 relay.py\"\n", ch.Name)
	fmt.Fprintln(w, "The protocol: docs/relay-protocol.md. The lab runs your program with your rights; it does not sandbox its code.")
	return nil
}

// wrapped writes text wrapped to the page, each line after indent.
func wrapped(w io.Writer, indent, text string) {
	for _, l := range reports.Wrap(text, 100-len(indent)) {
		fmt.Fprintln(w, indent+l)
	}
}

func settingsText(m map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s = %v", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func challengeRunAction(c *cli.Context, s *settings) error {
	ch, err := lookupChallenge(c)
	if err != nil {
		return err
	}
	relay := strings.TrimSpace(c.String("relay"))
	if relay == "" {
		return usagef("--relay must name your relay's command line, e.g. --relay \"python3 relay.py\"")
	}
	bound, err := nonNegative(c, "bound")
	if err != nil {
		return err
	}
	maxOrderings, err := nonNegative(c, "max-orderings")
	if err != nil {
		return err
	}
	explored, err := ch.Sequence(ch.Explored)
	if err != nil {
		return err
	}
	seqs := ch.Sequences
	var replay *challenge.Ordering
	if text := c.String("replay"); text != "" {
		ord, err := challenge.ParseOrdering(text)
		if err != nil {
			return usagef("--replay: %v", err)
		}
		replay, seqs = &ord, []challenge.Sequence{explored}
		if c.String("sequence") != "" {
			return usagef("--replay replays the explored sequence (%s); drop --sequence", explored.Name)
		}
	}
	if name := c.String("sequence"); name != "" {
		seq, err := ch.Sequence(name)
		if err != nil {
			return &usageError{err}
		}
		seqs = []challenge.Sequence{seq}
	}
	timeout, err := parseDuration("timeout", c.String("timeout"))
	if err != nil {
		return err
	}
	if timeout <= 0 {
		return usagef("--timeout must be more than 0, not %s", c.String("timeout"))
	}
	if bound > 0 && maxOrderings < 1 {
		return usagef("--max-orderings must be at least 1 when --bound explores (%d); --bound 0 explores nothing", bound)
	}
	out := c.String("out")
	if err := checkOut(out); err != nil {
		return err
	}
	w := c.App.Writer
	failed := 0
	for _, seq := range seqs {
		if c.Context.Err() != nil {
			return c.Context.Err()
		}
		started := s.now().UTC()
		o := challenge.Options{Relay: relay, Timeout: timeout, TempRoot: s.tempRoot, Warn: s.warn, KeepDB: c.Bool("keep-db"), Ordering: replay}
		res, err := challenge.Run(c.Context, ch, seq, o)
		if err != nil {
			return err
		}
		if err := fileChallengeRun(c, w, out, res, reports.RunInfo{Started: started, Elapsed: s.now().Sub(started)}); err != nil {
			return err
		}
		if !res.Passed() {
			failed++
		}
	}
	if replay == nil && c.String("sequence") == "" && bound > 0 {
		started := s.now().UTC()
		o := challenge.Options{Relay: relay, Timeout: timeout, TempRoot: s.tempRoot, Warn: s.warn}
		x, err := challenge.Explore(c.Context, ch, explored, o, bound, maxOrderings)
		if err != nil {
			return err
		}
		switch {
		case x.Failing != nil:
			which := "the ordering " + x.Ordering.String()
			if len(x.Ordering.Switches) == 0 {
				which = "the first, in order without a switch,"
			}
			fmt.Fprintf(w, "Explored %s of the %s sequence's requests: %s broke an invariant.\n", orderings(x.Runs), explored.Name, which)
			if err := fileChallengeRun(c, w, out, x.Failing, reports.RunInfo{Started: started, Elapsed: s.now().Sub(started)}); err != nil {
				return err
			}
			fmt.Fprintf(w, "  replay it: outboxlab challenge run %s --relay %q --replay %s\n\n", ch.Name, relay, x.Ordering)
			failed++
		case x.Complete:
			fmt.Fprintf(w, "Explored %s of the %s sequence's requests, every one with up to %s: none broke an invariant.\n", orderings(x.Runs), explored.Name, switches(bound))
		default:
			fmt.Fprintf(w, "Explored %s of the %s sequence's requests (the --max-orderings limit) before finishing %s: none broke an invariant.\n",
				orderings(x.Runs), explored.Name, switches(bound))
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "%s: %d of its runs failed.\n", ch.Name, failed)
		return errChecksFailed
	}
	return nil
}

// fileChallengeRun writes a challenge run's report (and page) and prints
// its outcome.
func fileChallengeRun(c *cli.Context, w io.Writer, out string, res *lab.Result, info reports.RunInfo) error {
	path, err := reports.Write(out, res, info)
	if err != nil {
		return err
	}
	page := ""
	if c.Bool("html") {
		if page, err = reports.WriteHTML(path, res, info); err != nil {
			return err
		}
	}
	printRun(w, res, path, page)
	return nil
}

// nonNegative reads flag name as a whole number of at least 0.
func nonNegative(c *cli.Context, name string) (int, error) {
	n, err := strconv.Atoi(c.String(name))
	if err != nil || n < 0 {
		return 0, usagef("--%s must be a whole number of at least 0, not %q", name, c.String(name))
	}
	return n, nil
}

// orderings says n orderings in words: "1 ordering", "6 orderings".
func orderings(n int) string {
	if n == 1 {
		return "1 ordering"
	}
	return strconv.Itoa(n) + " orderings"
}

// switches says n switches in words: "1 switch", "2 switches".
func switches(n int) string {
	if n == 1 {
		return "1 switch"
	}
	return strconv.Itoa(n) + " switches"
}
