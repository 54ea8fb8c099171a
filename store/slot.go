package store

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Shape is what one statement of a slot file must be and may do.
type Shape struct {
	Kind string // "SELECT", "UPDATE" or "INSERT"
	// Table is the one table an UPDATE or INSERT may write ("" for a
	// SELECT); an INSERT may be an upsert of that same table (ON CONFLICT
	// DO NOTHING or DO UPDATE).
	Table string
	// Params are the named parameters it may use, without ':'; any other
	// :name, and a positional ?, is refused.
	Params []string
	// ReturnsID requires it to return one integer column, a message's Id:
	// the claim's SELECT selects the next one, a batch completion's UPDATE
	// returns (RETURNING) each it changed, and the lab reads them.
	ReturnsID bool
}

// The kinds of statement a [Shape] names.
const (
	KindSelect = "SELECT"
	KindUpdate = "UPDATE"
	KindInsert = "INSERT"
)

// Slot is the place in a lesson's statement set that a file fills: the
// statements it must hold, and the database the checks judge them on.
type Slot struct {
	Name   string  // "claim", "finalize", "ack", ...
	Shapes []Shape // one per statement, in file order (the claim has two, every other slot one)
	// Alternative is the other form a file may take, with another number
	// of statements: the claim's one statement that takes the message and
	// returns its Id. A file of len(Alternative) statements is parsed and
	// checked as one of Alternative's shapes (nil: no other form).
	Alternative []Shape
	// alternate says Shapes are the Alternative [ParseSlotFile] chose, so
	// a refusal says which form it read the file as.
	alternate bool
	// Schema is the lesson's migrations, on which the checks compile and
	// run the statements.
	Schema []Migration
	// CheckRows are the rows the checks seed before running them: SQL
	// valid on SQLite and on PostgreSQL ("" none).
	CheckRows string
	// Samples are a value for each parameter of the Shapes (an int64 or a
	// string), bound by the checks.
	Samples map[string]any `json:"-"`
}

// ClaimSlot is Day 15's claim: a SELECT of the oldest claimable message's
// Id (:now, :worker, :until), then the UPDATE of OutboxMessages that takes
// message :id, or one UPDATE that takes the oldest claimable message and
// returns its Id (the production form, [ProductionClaim]), judged on the
// Day 15 tables holding one message in each state a claim must tell apart.
var ClaimSlot = Slot{
	Name: "claim",
	Shapes: []Shape{
		{Kind: KindSelect, Params: []string{"now", "worker", "until"}, ReturnsID: true},
		{Kind: KindUpdate, Table: "OutboxMessages", Params: []string{"now", "worker", "until", "id"}},
	},
	Alternative: []Shape{{Kind: KindUpdate, Table: "OutboxMessages", Params: []string{"now", "worker", "until"}, ReturnsID: true}},
	Schema:      []Migration{PaymentsOutbox, OutboxLeasing},
	CheckRows:   claimCheckRows,
	Samples:     map[string]any{"now": "2026-01-15T09:00:00.000Z", "worker": "Worker-A", "until": "2026-01-15T09:00:01.000Z", "id": int64(1)},
}

// claimCheckRows gives the private copy a claim file is checked on one
// message in each state a claim must tell apart, so the check runs the
// statements over rows as the run will: Pending, Processing under an expired
// lease, Processing under a live one, and Processed.
var claimCheckRows = audit("lab: the claim check's four messages, one in each state", `INSERT INTO OutboxMessages (MessageType, AggregateKey, Payload, Status, CreatedAtUtc, LockedBy, LockedUntilUtc, ProcessedAtUtc) VALUES
 ('PaymentCreated', 'PAY-1', '{}', 'Pending',    '2026-01-15T08:59:00.000Z', NULL,       NULL,                       NULL),
 ('PaymentCreated', 'PAY-2', '{}', 'Processing', '2026-01-15T08:59:01.000Z', 'Worker-B', '2026-01-15T08:59:30.000Z', NULL),
 ('PaymentCreated', 'PAY-3', '{}', 'Processing', '2026-01-15T08:59:02.000Z', 'Worker-B', '2026-01-15T09:00:30.000Z', NULL),
 ('PaymentCreated', 'PAY-4', '{}', 'Processed',  '2026-01-15T08:59:03.000Z', NULL,       NULL,                       '2026-01-15T08:59:10.000Z')`).SQL

// SlotFile is an untrusted file's statements for a slot, to be run as
// untrusted input: every connection that may run them is guarded (see
// [Config.SlotFile]), and [CheckSlotFile] or [GraderRole.CheckSlotFile]
// judges them before a run.
type SlotFile struct {
	Slot Slot
	// Texts are the statements, one per Slot.Shapes, without their
	// comments: what runs, what is checked and what a report prints.
	Texts []string
}

// SlotStatementTimeout bounds one run of a slot file's statement: a
// lesson's statement takes a handful of rows and must be cheap, so a
// statement that computes for longer (a cross join of a CTE, a sort
// spilling to disk) is interrupted instead of pinning a CPU or filling
// TMPDIR.
const SlotStatementTimeout = 2 * time.Second

// MaxSlotFileSize is the most bytes a slot file may hold.
const MaxSlotFileSize = 1 << 20

// SlotFileError says why a slot file was refused.
type SlotFileError struct {
	Statement string // "first statement", "second statement", "the statement" or "file"
	Reason    string
}

func (e *SlotFileError) Error() string {
	if e.Statement == "file" {
		return e.Reason
	}
	return e.Statement + ": " + e.Reason
}

// SlotStatementError is a slot file's statement that failed while a run
// used it: the engine could not compile it, refused what it did, or
// stopped it (a syntax error, an unknown column, a constraint, an integer
// overflow, its time limit). It is the file's fault, not the lab's; a busy
// database, a full disk or an I/O error is not one.
type SlotStatementError struct {
	Statement string // as [SlotFileError.Statement] names it
	Err       error  // the engine's error
}

func (e *SlotStatementError) Error() string { return e.Err.Error() }
func (e *SlotStatementError) Unwrap() error { return e.Err }

// ParseSlotFile splits a slot file's text into its statements with
// [SplitStatements], without their comments, so what runs, what is
// checked and what a report prints is one text. It checks only their
// number, and that no line of one starts with "--"; [CheckSlotFile] and
// [GraderRole.CheckSlotFile] ask the engine what they are. A statement
// that ignores a parameter (an UPDATE without :id) is not refused: the
// lesson's checks show what it does. A refusal is a *[SlotFileError].
func ParseSlotFile(slot Slot, text string) (SlotFile, error) {
	stmts, err := SplitStatements(text)
	if err != nil {
		return SlotFile{}, &SlotFileError{"file", strings.TrimPrefix(err.Error(), "store: ")}
	}
	if alt := slot.Alternative; len(alt) > 0 && len(stmts) == len(alt) && len(stmts) != len(slot.Shapes) {
		slot.Shapes, slot.Alternative, slot.alternate = alt, nil, true
	}
	if len(stmts) != len(slot.Shapes) {
		return SlotFile{}, &SlotFileError{"file", fmt.Sprintf("must hold %s; found %d", slot.describe(), len(stmts))}
	}
	f := SlotFile{Slot: slot}
	for i, s := range stmts {
		for _, line := range strings.Split(s.Code, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				// A report (and the scenario) drops lines that start with
				// "--"; inside a string that would change what runs.
				return SlotFile{}, &SlotFileError{slot.statementName(i), "a line inside a string or quoted name starts with '--'; start it otherwise"}
			}
		}
		f.Texts = append(f.Texts, s.Code)
	}
	return f, nil
}

// valid reports a SlotFile the lab built wrong (a text per shape, a
// sample per parameter): the lab's fault, not the file's.
func (f SlotFile) valid() error {
	if len(f.Slot.Shapes) == 0 || len(f.Texts) != len(f.Slot.Shapes) {
		return fmt.Errorf("store: slot %s file has %d texts for %d shapes", f.Slot.Name, len(f.Texts), len(f.Slot.Shapes))
	}
	for _, sh := range f.Slot.Shapes {
		switch sh.Kind {
		case KindSelect:
		case KindUpdate, KindInsert:
			if sh.Table == "" {
				return fmt.Errorf("store: slot %s: an %s shape names no table", f.Slot.Name, sh.Kind)
			}
		default:
			return fmt.Errorf("store: slot %s: unknown statement kind %q", f.Slot.Name, sh.Kind)
		}
		for _, p := range sh.Params {
			if _, ok := f.Slot.Samples[p]; !ok {
				return fmt.Errorf("store: slot %s has no sample value for :%s", f.Slot.Name, p)
			}
		}
	}
	return nil
}

// statement returns the index of the file's statement query is, or -1.
func (f *SlotFile) statement(query string) int {
	if f == nil {
		return -1
	}
	for i, t := range f.Texts {
		if t == query {
			return i
		}
	}
	return -1
}

// ordinals name the statements of a file of several.
var ordinals = []string{"first", "second", "third", "fourth", "fifth"}

// statementName is how a refusal names statement i of the slot's files:
// "the statement" in a file of one, "first statement", "second
// statement"... in a file of several.
func (s Slot) statementName(i int) string {
	switch {
	case len(s.Shapes) == 1 && s.alternate:
		return "the statement (a file of one statement is read as the " + s.Name + " in one statement)"
	case len(s.Shapes) == 1:
		return "the statement"
	case i < len(ordinals):
		return ordinals[i] + " statement"
	}
	return fmt.Sprintf("statement %d", i+1)
}

// describe says what a file for the slot holds, for a refusal.
func (s Slot) describe() string {
	form := describeShapes(s.Shapes)
	if len(s.Alternative) > 0 {
		form += ", or " + describeShapes(s.Alternative)
	}
	return form
}

// describeShapes says what a file of shapes holds.
func describeShapes(shapes []Shape) string {
	var kinds []string
	for _, sh := range shapes {
		kinds = append(kinds, sh.want())
	}
	if len(kinds) == 1 {
		return "one statement (" + kinds[0] + ")"
	}
	n := fmt.Sprint(len(kinds))
	if len(kinds) < len(counts) {
		n = counts[len(kinds)]
	}
	return fmt.Sprintf("%s statements separated by ';' (%s)", n, strings.Join(kinds, ", then "))
}

// counts name the number of statements in a file of a few.
var counts = []string{"no", "one", "two", "three", "four", "five"}

// want says what a statement of the shape must be, for a refusal.
func (sh Shape) want() string {
	switch sh.Kind {
	case KindUpdate:
		if sh.ReturnsID {
			return "an UPDATE of " + sh.Table + " that writes nothing else and returns the Id of each row it changes (RETURNING Id)"
		}
		return "an UPDATE of " + sh.Table + " that writes nothing else"
	case KindInsert:
		return "an INSERT into " + sh.Table + " (or an upsert of it) that writes nothing else"
	}
	return "a read-only SELECT"
}

// allows reports whether the shape may use the named parameter.
func (sh Shape) allows(param string) bool {
	for _, p := range sh.Params {
		if strings.EqualFold(p, param) {
			return true
		}
	}
	return false
}

// paramRefusal says why a statement of the shape may not use param
// (a name, or "#n" for a positional parameter).
func (sh Shape) paramRefusal(param string) string {
	name := ":" + param
	if strings.HasPrefix(param, "#") {
		name = "a positional parameter ?"
	}
	if len(sh.Params) == 0 {
		return "uses " + name + "; this statement gets no parameter"
	}
	names := make([]string, len(sh.Params))
	for i, p := range sh.Params {
		names[i] = ":" + p
	}
	list := names[0]
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return "uses " + name + "; this statement gets only " + list
}

// sample is the value the checks bind to the shape's parameter p.
func (s Slot) sample(p string) any {
	for name, v := range s.Samples {
		if strings.EqualFold(name, p) {
			return v
		}
	}
	return nil
}

// tables are the tables the slot's schema creates, in order, for a
// refusal that lists what a file may read.
func (s Slot) tables() []string {
	var out []string
	for _, m := range s.Schema {
		for _, match := range createTable.FindAllStringSubmatch(m.SQL, -1) {
			out = append(out, match[1])
		}
	}
	return out
}

// createTable finds the name of each table a migration creates.
var createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)`)
