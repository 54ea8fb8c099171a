// Command relay-go is the lab's reference relay in Go, built on the
// protocol's client (relayproto): it passes every challenge, and each of
// its -mistake flags is a known bug that makes named checks fail (the
// challenges' answer keys, run by challenge's tests).
//
//	outboxlab challenge run day15-worker --relay "go run ./examples/relay-go"
//	outboxlab challenge run day15-worker --relay "go run ./examples/relay-go -mistake zero-rows-ok"
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/outboxlab/outboxlab/relayproto"
)

// The mistakes this relay can make on purpose.
const (
	zeroRowsOK       = "zero-rows-ok"         // finalize commits although its owner-guarded update changed 0 rows
	noOwnerGuard     = "no-owner-guard"       // finalize updates the message by Id alone
	pendingOnlyClaim = "pending-only-claim"   // the claim ignores expired leases
	ownClock         = "own-clock"            // leases are written and compared on the program's own clock
	splitClaim       = "split-claim"          // the claim selects in one transaction and takes by Id alone in another
	skipsProvider    = "skips-provider"       // it stores Failed without asking the provider
	dropsTxnID       = "drops-transaction-id" // it stores Paid without the provider's transaction id
	ignoresSkew      = "ignores-skew"         // it takes a lease as ended by its own clock, however far off it may be
)

var mistakes = []string{zeroRowsOK, noOwnerGuard, pendingOnlyClaim, ownClock, splitClaim, skipsProvider, dropsTxnID, ignoresSkew, noToken, completeBeforeSend, noDedup, ackBeforeEffect, noRenew, renewWithoutStopping, ignoreSigterm, noDeadline}

func main() {
	mistake := flag.String("mistake", "", fmt.Sprintf("make a known mistake on purpose: one of %v", mistakes))
	flag.Parse()
	if err := run(*mistake); err != nil {
		fmt.Fprintln(os.Stderr, "relay-go:", err)
		os.Exit(1)
	}
}

func run(mistake string) error {
	known := mistake == ""
	for _, m := range mistakes {
		known = known || m == mistake
	}
	if !known {
		return fmt.Errorf("unknown mistake %q; the mistakes are %v", mistake, mistakes)
	}
	c, err := relayproto.Dial()
	if err != nil {
		return err
	}
	switch c.Hello.Challenge {
	case "day15-worker":
		return (&worker{c: c, mistake: mistake}).run()
	case "fenced-relay":
		return (&relay{c: c, mistake: mistake}).run()
	case "heartbeat-relay":
		return newHeartbeat(c, mistake).run()
	case "inbox-consumer":
		return (&consumer{c: c, mistake: mistake}).run()
	}
	return fmt.Errorf("no relay for challenge %q", c.Hello.Challenge)
}
