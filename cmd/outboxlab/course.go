package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/outboxlab/outboxlab/internal/newfolder"

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
			written, err := writeNewFolder(dir, "the course", course.Files())
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "wrote the course catalogue: %d pages in %s (start at %s)\n", len(written), dir, written[0])
			return nil
		},
	}
}

// writeNewFolder writes files into dir, new or empty, as
// [newfolder.Write] does (what names the output in a refusal). A folder
// refused, or one that cannot be made, is bad input (exit 2); a write that
// fails partway is the lab's failure (exit 3), and says how many files it
// wrote.
func writeNewFolder(dir, what string, files []newfolder.File) ([]string, error) {
	written, err := newfolder.Write(dir, what, files)
	if err == nil {
		return written, nil
	}
	var notEmpty *newfolder.NotEmptyError
	var notFolder *newfolder.NotAFolderError
	if errors.As(err, &notEmpty) || errors.As(err, &notFolder) || len(written) == 0 {
		return nil, &usageError{err}
	}
	return written, fmt.Errorf("%w (%d of the %d files were written)", err, len(written), len(files))
}
