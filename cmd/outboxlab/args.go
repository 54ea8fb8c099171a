package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed lets flags follow the positional arguments (`run NAME
// --variant X`), which the standard flag parsing would otherwise treat as
// more names. It moves each flag of the chosen command, with its value,
// ahead of the positionals; for a command with subcommands (`exercise
// show NAME --starter`), the chosen subcommand's. A flag that takes a value may be given once:
// the standard parsing would keep the last and drop the others silently.
func interspersed(app *cli.App, args []string) ([]string, error) {
	if len(args) < 3 {
		return args, nil
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[1]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args, nil
	}
	prefix := 2 // the program and the command; with a subcommand, 3
	for _, sub := range cmd.Subcommands {
		if sub.HasName(args[2]) {
			cmd, prefix = sub, 3
		}
	}
	takesValue := map[string]bool{}
	primary := map[string]string{} // any of a flag's names -> its first
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
			primary[n] = f.Names()[0]
		}
	}
	var flags, positional []string
	given := map[string]bool{} // value flags seen so far, by primary name
	help := false
	rest := args[prefix:]
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
		if name == "h" || name == "help" {
			help = true
		}
		if bare, _, _ := strings.Cut(name, "="); takesValue[bare] {
			// A flag that takes one value, given twice, is a mistake
			// (two claim files, two servers), not a silent override.
			if given[primary[bare]] {
				return nil, usagef("--%s is given more than once; give it once", primary[bare])
			}
			given[primary[bare]] = true
		}
		if !strings.Contains(name, "=") && takesValue[name] {
			if i+1 >= len(rest) || rest[i+1] == "--" {
				return nil, usagef("%s needs a value", a)
			}
			flags = append(flags, rest[i+1])
			i++
		}
	}
	if help {
		// Help is about the command, not about the names given to it.
		positional = nil
	}
	out := append(slices.Clone(args[:prefix]), flags...)
	if len(positional) > 0 {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, nil
}
