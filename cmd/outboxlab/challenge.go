package main

import (
	"fmt"
	"io"
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
	fmt.Fprintf(w, "\nTables your statements may use: %s (the schema is `outboxlab describe %s`'s).\n", strings.Join(ch.Tables, ", "), ch.Lesson)
	fmt.Fprintf(w, "Settings in hello's reply: %s\n", settingsText(ch.Settings))
	fmt.Fprintln(w, "\nSequences (each a fresh database and fresh instances of your relay):")
	for _, s := range ch.Sequences {
		wrapped(w, "  ", fmt.Sprintf("%s (%s): %s.", s.Name, strings.Join(s.Instances, ", "), s.About))
	}
	fmt.Fprintln(w, "\nChecks (on the database and the lab's ledgers, after the lab stops your relay):")
	for _, d := range ch.Checks {
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
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s = %v", k, v))
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
	seqs := ch.Sequences
	if name := c.String("sequence"); name != "" {
		seq, err := ch.Sequence(name)
		if err != nil {
			return &usageError{err}
		}
		seqs = []challenge.Sequence{seq}
	}
	timeout, err := parseDuration("--timeout", c.String("timeout"))
	if err != nil {
		return err
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
		res, err := challenge.Run(c.Context, ch, seq, challenge.Options{Relay: relay, Timeout: timeout, TempRoot: s.tempRoot,
			Warn: s.warn, KeepDB: c.Bool("keep-db")})
		if err != nil {
			return err
		}
		info := reports.RunInfo{Started: started, Elapsed: s.now().Sub(started)}
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
		if !res.Passed() {
			failed++
		}
	}
	if failed > 0 {
		if len(seqs) > 1 {
			fmt.Fprintf(w, "%d of %d sequences of %s failed.\n", failed, len(seqs), ch.Name)
		}
		return errChecksFailed
	}
	return nil
}
