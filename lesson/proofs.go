package lesson

import "github.com/outboxlab/outboxlab/store"

// A lesson carries, beside its sequence and its checks, what the
// registry's tests need to prove it: a statement swap for each check no
// variant breaks ([Breaker]), every guard of its statements with what
// removing it breaks ([Guard]), and the child processes a run with
// Options.Processes starts ([Processes]). The tests range over the
// registry, so a lesson that leaves one out fails them by its name.

// Breaker is a statement no variant runs, swapped into the lesson's set in
// place of one of its own, and the checks that must then fail: the proof,
// for a check no variant breaks, that it can fail.
type Breaker struct {
	Name   string            // the replaced statement, in words
	Swap   func(set any) any // the lesson's set with one statement replaced
	Breaks []string
}

// SwapOf adapts a typed swap of a lesson's statement set to a
// [Breaker]'s or an [Options.Swap].
func SwapOf[T any](f func(T) T) func(any) any { return func(s any) any { return f(s.(T)) } }

// Guard is one predicate of a statement the lesson runs (one top-level
// AND of its WHERE clause), and what removing it from that statement does
// to the lesson's own run.
type Guard struct {
	Stmt  store.Stmt // the lesson's statement, as the store declares it
	Guard string     // the predicate, as its WHERE clause writes it
	// Swap puts the guardless statement into the lesson's statement set;
	// nil swaps it wherever a set holds the lesson's statement
	// ([store.Swap]).
	Swap func(guardless store.Stmt) func(any) any
	// Breaks are the checks that must fail, and only they.
	Breaks []string
	// Gap, when set, says why removing the guard changes nothing in any
	// run of the lesson: the run must still pass, so that closing the gap
	// shows and moves the guard to Breaks.
	Gap string
	// TaughtBy, when set, names the lesson that teaches the guard and
	// whose run decides it; this lesson only reuses the statement.
	TaughtBy string
}

// Child is one application instance a run with Options.Processes starts
// as a child process, as its processes table shows it: the phase and the
// name it runs under, its role, the failpoint where the lab killed it by
// SIGKILL ("": it finished its work and exited 0), and whether the lab
// stalled it with SIGSTOP and SIGCONT.
type Child struct {
	Phase, Role, Point string
	Stalled            bool
}

// Processes is what a run of the lesson with Options.Processes shows.
type Processes struct {
	// Children are the child processes a run of variant ("" for the
	// design) starts, in any order.
	Children func(variant string) []Child
	// Same, when set, titles a table whose rows must equal those of the
	// run without processes; SameChecks says the checks must observe the
	// same figures: they do not depend on where the instances ran.
	Same       string
	SameChecks bool
	// Serial runs the lesson's runs with processes one at a time (each is
	// heavy: session 21's drains of up to 500 messages).
	Serial bool
	// Elsewhere, when set, names the test that runs the lesson with
	// processes instead of the registry's (its children vary per
	// ordering or per case).
	Elsewhere string
}

// Always is a [Processes.Children] that starts the same children for the
// design and every variant.
func Always(children ...Child) func(variant string) []Child {
	return func(string) []Child { return children }
}

// The claimable predicates, as the claims write them: guards several
// lessons' statements hold.
const (
	ClaimableOutbox = "(Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now))"
	ClaimableEvent  = "(lease_until IS NULL OR lease_until <= :now)"
)

// TokenImpliesOwner is why the owner guard of a token-fenced statement
// never decides alone: a [Guard.Gap].
const TokenImpliesOwner = "every claim increments the row's token, so a row another worker holds never carries the " +
	"token a stale writer presents: ClaimToken refuses every write LockedBy refuses, and LockedBy could decide alone " +
	"only after a claim that keeps the token"

// Reused is the guards of stmt a lesson runs but other lessons teach,
// guard -> the teaching lesson's name: the teacher's own run decides each.
func Reused(stmt store.Stmt, taughtBy map[string]string) []Guard {
	var out []Guard
	for guard, teacher := range taughtBy {
		out = append(out, Guard{Stmt: stmt, Guard: guard, TaughtBy: teacher})
	}
	return out
}
