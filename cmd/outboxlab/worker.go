package main

import (
	"context"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/instance"
	"github.com/outboxlab/outboxlab/proc"
)

// workerCommand is the hidden `worker --role ROLE` subcommand: one of a
// lesson's application instances as a child process of `run --processes`,
// which starts this same program and talks to it over its stdin and stdout
// (see package proc). People never type it.
func workerCommand() *cli.Command {
	return &cli.Command{
		Name:         proc.Command,
		Hidden:       true,
		Usage:        "(internal) play one lesson instance as a child process of run --processes",
		Flags:        []cli.Flag{&cli.StringFlag{Name: "role", Usage: "the `ROLE` to play"}},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.String("role") == "" || c.Args().Present() {
				return usagef("worker takes --role ROLE and nothing else; it is started by run --processes, not by hand")
			}
			// The program's stop signals do not cancel a worker: its parent
			// stops it (SIGKILL, or the end of its stdin), and a role may
			// handle SIGTERM itself, as session 22's relay does.
			return instance.Serve(context.WithoutCancel(c.Context), c.String("role"), os.Stdin, c.App.Writer)
		},
	}
}

// isWorker reports whether args start the worker subcommand: a child of a
// run, which leaves the sweep of old run folders to its parent.
func isWorker(args []string) bool {
	return len(args) > 1 && args[1] == proc.Command
}
