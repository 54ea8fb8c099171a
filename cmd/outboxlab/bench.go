package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/bench"
	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/runfolder"
)

func benchCommand(s *settings) *cli.Command {
	def := bench.DefaultConfig()
	return &cli.Command{
		Name:  "bench",
		Usage: "measure the claim paths at scale: the ceiling of a write transaction, then messages × workers",
		Description: "Measures, on this machine, the ceiling (a prepared single-row UPDATE by primary key, one\n" +
			"BEGIN IMMEDIATE transaction each) and then drains a fresh backlog for every combination of\n" +
			"--messages, --workers, --claim and --batch, each worker on its own connection. Lists are\n" +
			"comma-separated. --claim fetch-ahead is River's shape, fenced: one process whose one fetcher claims\n" +
			"up to its free workers in one statement, workers that take one message at a time, and one completer\n" +
			"that completes finished messages in one statement each row under its owner and token (at\n" +
			"--complete-batch or --complete-interval). Databases live in a temporary folder that is removed\n" +
			"afterwards. With --db the ceiling and every cell run on that PostgreSQL server, each in a schema of\n" +
			"its own that is dropped afterwards. --river drains the same backlogs with River (its pgx driver on\n" +
			"PostgreSQL, its SQLite driver on SQLite) and --goqite with goqite (SQLite), beside them. Exit 1 if\n" +
			"any cell had errors, duplicates, lost messages or refused completions.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "messages", Value: joinInts(def.Messages), Usage: "backlog sizes, a `LIST` such as 1000,10000,100000"},
			&cli.StringFlag{Name: "workers", Value: joinInts(def.Workers), Usage: "worker counts, a `LIST`; each worker is its own connection"},
			&cli.StringFlag{Name: "claim", Value: strings.Join(def.Claims, ","), Usage: "claim design: lesson, indexed, skip-locked (PostgreSQL) or fetch-ahead, or a `LIST` of them"},
			&cli.StringFlag{Name: "batch", Value: joinInts(def.Batches), Usage: "messages per claim and per finalize transaction, a `LIST` such as 1,16"},
			&cli.StringFlag{Name: "synchronous", Value: "normal", Usage: "SQLite synchronous `SETTING`: normal or full"},
			&cli.StringFlag{Name: "retry", Value: bench.RetryLab, Usage: "lock waiting `MODE`: lab (short jittered retries) or sqlite (SQLite's busy handler)"},
			dbFlag,
			&cli.IntFlag{Name: "complete-batch", Value: def.CompleteBatch, Usage: "fetch-ahead: the completer flushes once it holds `N` finished messages"},
			&cli.StringFlag{Name: "complete-interval", Value: def.CompleteInterval.String(), Usage: "fetch-ahead: or this `DURATION` after the first of them finished (0: as soon as it is free)"},
			&cli.BoolFlag{Name: "river", Usage: "also drain each backlog with River (riverqueue/river; its SQLite driver without --db), for each worker count"},
			&cli.BoolFlag{Name: "checkpoint", Value: def.Checkpoint, Usage: "with --db: CHECKPOINT before the ceiling and before every drain, so each starts with nothing dirty and no checkpoint of earlier cells still writing (--checkpoint=false leaves checkpoints to the server)"},
			&cli.BoolFlag{Name: "goqite", Usage: "SQLite: also drain each backlog with goqite (maragu.dev/goqite), for each worker count"},
			formatFlag,
			&cli.StringFlag{Name: "out", Usage: "also file the output under this `FOLDER` (never overwriting)"},
			&cli.StringFlag{Name: "broker", Usage: "the end-to-end relay bench instead, through the `BROKER` nats (an embedded NATS " +
				"JetStream) or nats://HOST:PORT: claim, publish, fenced completion once acknowledged, beside the same design " +
				"without a broker, for the first --messages and --batch and each --workers count"},
		},
		OnUsageError: onUsageError,
		Action:       func(c *cli.Context) error { return benchAction(c, s) },
	}
}

func benchAction(c *cli.Context, s *settings) error {
	format, err := checkFormat(c)
	if err != nil {
		return err
	}
	if c.Args().Present() {
		return usagef("bench takes no arguments (got %q)", c.Args().First())
	}
	if b := c.String("broker"); b != "" {
		return relayBenchAction(c, s, b)
	}
	cfg := bench.DefaultConfig()
	for _, l := range []struct {
		flag string
		dst  *[]int
	}{{"messages", &cfg.Messages}, {"workers", &cfg.Workers}, {"batch", &cfg.Batches}} {
		if *l.dst, err = parseIntList(l.flag, c.String(l.flag)); err != nil {
			return err
		}
	}
	cfg.Claims = splitList(c.String("claim"))
	cfg.Synchronous = c.String("synchronous")
	cfg.Retry = c.String("retry")
	cfg.River = c.Bool("river")
	cfg.Goqite = c.Bool("goqite")
	cfg.Checkpoint = c.Bool("checkpoint")
	cfg.CompleteBatch = c.Int("complete-batch")
	if v := c.String("complete-interval"); v == "0" {
		cfg.CompleteInterval = 0
	} else if cfg.CompleteInterval, err = parseDuration("complete-interval", v); err != nil {
		return err
	}
	if cfg.Database, err = serverURL(c); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{err}
	}
	out, dir, done, err := benchFolders(c, s)
	if err != nil {
		return err
	}
	defer done()
	cfg.Dir = dir
	if s.ceilingRound > 0 {
		cfg.CeilingRounds, cfg.CeilingRound = 2, s.ceilingRound
	}
	cfg.Progress = c.App.ErrWriter

	started := s.now().UTC()
	rep, err := bench.Run(c.Context, cfg)
	if err != nil {
		if c.Context.Err() != nil {
			return c.Context.Err()
		}
		return err
	}
	var buf bytes.Buffer
	ext := ".txt"
	if format == "json" {
		ext = ".jsonl"
		err = reports.BenchJSON(&buf, rep)
	} else {
		err = reports.BenchText(&buf, rep)
	}
	if err != nil {
		return err
	}
	if err := printBenchReport(c, out, "Bench-RunReport-"+started.Format("20060102T150405Z")+ext, buf.Bytes()); err != nil {
		return err
	}
	for _, r := range rep.Rows {
		if r.Errors > 0 || r.Duplicates > 0 || r.Lost > 0 || r.Rejected > 0 {
			fmt.Fprintf(c.App.ErrWriter, "bench: %d messages, %d workers, %s, batch %d: %d errors, %d duplicates, %d lost, %d finalizations refused\n",
				r.Messages, r.Workers, r.Claim, r.Batch, r.Errors, r.Duplicates, r.Lost, r.Rejected)
			return errChecksFailed
		}
	}
	return nil
}

// benchFolders checks that --out (if given) can take the report and
// makes the bench's temporary folder, marked with this process's pid so
// that a start after a SIGKILL sweeps it; done removes it.
func benchFolders(c *cli.Context, s *settings) (out, dir string, done func(), err error) {
	out = c.String("out")
	if out != "" {
		if err := reports.CheckWritable(out); err != nil {
			return "", "", nil, &usageError{err}
		}
	}
	dir, done, err = runfolder.New(s.tempRoot, runfolder.Prefix+"bench-", false, s.warn)
	if err != nil {
		return "", "", nil, fmt.Errorf("bench: make temporary folder: %w", err)
	}
	return out, dir, done, nil
}

// printBenchReport prints a bench's report and, with --out, files it
// there as name, never overwriting: the measurement ran, so a filing that
// fails is the lab's failure (exit 3).
func printBenchReport(c *cli.Context, out, name string, report []byte) error {
	if _, err := c.App.Writer.Write(report); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	path, err := reports.WriteNew(filepath.Join(out, "Bench", name), report)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "bench report: %s\n", path)
	return nil
}

// parseIntList reads a comma-separated list of positive integers in
// decimal ("0x10" and "010" are refused); "_" may group digits (1_000_000).
func parseIntList(flag, s string) ([]int, error) {
	parts := splitList(s)
	if len(parts) == 0 {
		return nil, usagef("--%s is empty; give a list such as 1000,10000", flag)
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		digits := strings.ReplaceAll(p, "_", "")
		n, err := strconv.Atoi(digits)
		if err != nil || n < 1 || !decimal.MatchString(digits) {
			return nil, usagef("--%s: %q is not a positive whole number", flag, p)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
