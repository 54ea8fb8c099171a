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
	"github.com/outboxlab/outboxlab/store"
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
					&cli.StringFlag{Name: "db", Usage: "run on the PostgreSQL server at `URL` (postgres://...): each sequence in a database of its own, " +
						"your relay's statements as a login role that may use the challenge's tables only (the login in URL needs CREATEROLE and CREATEDB)"},
					&cli.BoolFlag{Name: "keep-db", Usage: "keep each sequence's database (the SQLite file, or with --db the server's database) to look into"},
					&cli.StringFlag{Name: "timeout", Value: "2m", Usage: "stop a sequence after this `DURATION` of real time (such as 30s or 2m)"},
					&cli.StringFlag{Name: "bound", Value: "1", Usage: "search orderings with up to `N` switches: each failing sequence's, then the explored sequence's (0: none)"},
					&cli.StringFlag{Name: "max-orderings", Value: "400", Usage: "run at most `N` orderings while exploring"},
					&cli.StringFlag{Name: "replay", Usage: "run one sequence in the `ORDERING` a run printed (e.g. 7:Worker-B): --sequence's, else the explored sequence"},
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
		about := fmt.Sprintf("%s (%s): %s.", s.Name, strings.Join(s.Instances, ", "), s.About)
		if s.Horizon > 0 {
			about += fmt.Sprintf(" The lab stops it at %s of lab time.", s.Horizon)
		}
		wrapped(w, "  ", about)
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
	if name := c.String("sequence"); name != "" {
		seq, err := ch.Sequence(name)
		if err != nil {
			return &usageError{err}
		}
		seqs = []challenge.Sequence{seq}
	}
	var replay *challenge.Ordering
	if text := c.String("replay"); text != "" {
		ord, err := challenge.ParseOrdering(text)
		if err != nil {
			return usagef("--replay: %v", err)
		}
		replay = &ord
		if c.String("sequence") == "" {
			seqs = []challenge.Sequence{explored} // the explorer's orderings are the explored sequence's
		}
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
	dsn, err := challengeServer(c, s)
	if err != nil {
		return err
	}
	w := c.App.Writer
	failed := 0
	base := challenge.Options{Relay: relay, Timeout: timeout, TempRoot: s.tempRoot, Warn: s.warn, Database: dsn}
	explore := func(seq challenge.Sequence) (challenge.Exploration, error) {
		started := s.now().UTC()
		x, err := challenge.Explore(c.Context, ch, seq, base, bound, maxOrderings)
		if err != nil || x.Failing == nil {
			return x, err
		}
		return x, fileChallengeRun(c, w, out, x.Failing, reports.RunInfo{Started: started, Elapsed: s.now().Sub(started)})
	}
	exploredFailing := false
	for _, seq := range seqs {
		if c.Context.Err() != nil {
			return c.Context.Err()
		}
		started := s.now().UTC()
		o := base
		o.KeepDB, o.Ordering = c.Bool("keep-db"), replay
		res, err := challenge.Run(c.Context, ch, seq, o)
		if err != nil {
			return err
		}
		if err := fileChallengeRun(c, w, out, res, reports.RunInfo{Started: started, Elapsed: s.now().Sub(started)}); err != nil {
			return err
		}
		if why := challenge.NeverSpoke(res); why != "" {
			return usagef("your relay never spoke in %s (%s). The lab stopped there, as every sequence would end the same: "+
				"check that --relay %s starts your program from this folder", seq.Name, why, challenge.ShellQuote(relay))
		}
		if res.Passed() {
			continue
		}
		failed++
		if replay != nil || bound == 0 {
			continue
		}
		// The free run's failure, as steps a student can follow: the
		// shortest ordering of the sequence's requests that fails too.
		x, err := explore(seq)
		if err != nil {
			return err
		}
		exploredFailing = exploredFailing || seq.Name == explored.Name
		if x.Failing == nil {
			searched := fmt.Sprintf("%s, every one with up to %s", orderings(x.Runs), switches(bound))
			if !x.Complete {
				searched = fmt.Sprintf("%s, the --max-orderings limit, before finishing %s", orderings(x.Runs), switches(bound))
			}
			wrapped(w, "  ", fmt.Sprintf("No ordering of %s's requests that the lab tried broke it (%s): its failure above came "+
				"from how the instances met when they ran freely; run it again to see it vary.", seq.Name, searched))
			fmt.Fprintln(w)
			continue
		}
		wrapped(w, "  ", fmt.Sprintf("The shortest failing ordering of %s's requests, trying the fewest switches first (%s): %s.",
			seq.Name, orderings(x.Runs), orderingWords(x.Ordering)))
		replayCommand(w, ch, relay, seq.Name, x.Ordering, dsn)
	}
	if replay == nil && c.String("sequence") == "" && bound > 0 && !exploredFailing {
		x, err := explore(explored)
		if err != nil {
			return err
		}
		switch {
		case x.Failing != nil:
			wrapped(w, "", fmt.Sprintf("Explored %s of the %s sequence's requests: %s broke an invariant.", orderings(x.Runs), explored.Name,
				orderingWords(x.Ordering)))
			replayCommand(w, ch, relay, explored.Name, x.Ordering, dsn)
			failed++
		case x.Complete:
			wrapped(w, "", fmt.Sprintf("Explored %s of the %s sequence's requests, every one with up to %s: none broke an invariant.",
				orderings(x.Runs), explored.Name, switches(bound)))
		default:
			wrapped(w, "", fmt.Sprintf("Explored %s of the %s sequence's requests (the --max-orderings limit) before finishing %s: "+
				"none broke an invariant.", orderings(x.Runs), explored.Name, switches(bound)))
		}
	}
	if failed > 0 {
		fmt.Fprintf(w, "%s: %d of its sequences failed.\n", ch.Name, failed)
		return errChecksFailed
	}
	return nil
}

// replayCommand prints the command that runs challenge ch's sequence seq
// again in ordering o with relay ([challenge.Challenge.ReplayCommand]),
// and, on PostgreSQL, --db with its password hidden (the server's login
// reads one from PGPASSWORD or ~/.pgpass too). A command longer than a
// report's line is continued over lines with backslashes, a flag and its
// value per line (--sequence and --replay share one), so that it still
// pastes into a shell as one; a relay's own command line longer than a
// report's line stays whole. --out and --timeout are not repeated.
func replayCommand(w io.Writer, ch *challenge.Challenge, relay, seq string, o challenge.Ordering, dsn string) {
	parts := ch.ReplayParts(relay, seq, o)
	if dsn != "" {
		parts = append(parts, "--db "+challenge.ShellQuote(store.RedactURL(dsn)))
	}
	const lead = "  replay it: "
	line := lead + strings.Join(parts, " ")
	if len(line) > reports.MaxLine {
		line = lead + strings.Join(parts, " \\\n      ")
	}
	fmt.Fprint(w, line+"\n\n")
}

// challengeServer reads --db for a challenge's runs: "" without it, else
// the URL of a server that answers and can host the runs, each a grader
// role's database whose role the relay's statements log in as (checked
// now, exit 2 with the reason, after removing what killed runs left).
func challengeServer(c *cli.Context, s *settings) (string, error) {
	dsn, err := serverURL(c)
	if err != nil || dsn == "" {
		return "", err
	}
	if err := checkGraderServer(c.Context, s, dsn); err != nil {
		return "", err
	}
	return dsn, nil
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

// orderingWords names an ordering for a sentence.
func orderingWords(o challenge.Ordering) string {
	if len(o.Switches) == 0 {
		return "the first, in order without a switch (none)"
	}
	return "the ordering " + o.String()
}

// switches says n switches in words: "1 switch", "2 switches".
func switches(n int) string {
	if n == 1 {
		return "1 switch"
	}
	return strconv.Itoa(n) + " switches"
}
