package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/course"
)

// courseCommand writes the course's catalogue (package course) into a new
// or empty folder: an overview by session, lesson and exercise, and one
// page per lesson, generated from the lessons' own values.
func courseCommand() *cli.Command {
	return &cli.Command{
		Name:  "course",
		Usage: "write the course's catalogue as Markdown: an overview by session and one page per lesson",
		Description: "Writes DIR/" + course.Overview + " (sessions 14 to 23, the explorer last: each lesson, its exercises and what\n" +
			"it leaves for the next) and DIR/<lesson>.md for every lesson (what it teaches, its SQL, checks, facts,\n" +
			"figures, variants, options, exercises, what it leaves unsolved), all from the lessons' own values.\n" +
			"DIR must be new or empty: nothing is ever overwritten.",
		Flags:        []cli.Flag{&cli.StringFlag{Name: "out", Usage: "the `DIR` to write the catalogue into (new or empty)"}},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("course takes no arguments (got %q); it writes every lesson's page", c.Args().First())
			}
			dir := c.String("out")
			if dir == "" {
				return usagef("course needs --out DIR: the folder to write the catalogue into (new or empty)")
			}
			written, err := course.Write(dir, course.Files())
			if err != nil {
				var notEmpty *course.NotEmptyError
				var notFolder *course.NotAFolderError
				if errors.As(err, &notEmpty) || errors.As(err, &notFolder) || len(written) == 0 {
					return &usageError{err} // the folder was refused or could not be made: bad input, exit 2
				}
				return fmt.Errorf("%w (%d of the pages were written)", err, len(written))
			}
			fmt.Fprintf(c.App.Writer, "wrote the course catalogue: %d pages in %s (start at %s)\n", len(written), dir, written[0])
			return nil
		},
	}
}
