// Package proctest makes a test binary its own child process: the one
// TestMain of every package whose tests start workers (the standard
// helper-process pattern).
package proctest

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/outboxlab/outboxlab/proc"
)

// Serve plays a child's role, reading its work from in and writing its
// reports to out, as [proc.Serve] does.
type Serve func(ctx context.Context, role string, in io.Reader, out io.Writer) error

// Main is a test package's TestMain. Started as `<test binary> worker
// --role ROLE` (a test's run starts this binary in place of the program),
// it serves the role with serve and exits: 0 when the role finished, 1
// with its error on stderr. Otherwise it runs the package's tests.
func Main(m *testing.M, serve Serve) {
	if role, ok := Role(os.Args); ok {
		if err := serve(context.Background(), role, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Role is the role args start, `<program> worker --role ROLE`, and
// whether they start one.
func Role(args []string) (string, bool) {
	if len(args) == 4 && args[1] == proc.Command && args[2] == "--role" {
		return args[3], true
	}
	return "", false
}
