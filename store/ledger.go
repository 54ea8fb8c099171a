package store

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Stmt is one SQL statement the lab runs, with a name for people. Its text
// is a literal in one place in this package. A lesson's statements are a
// struct of Stmt fields; a mistake is a Stmt of its own that names the
// lesson statement it replaces and what it changes, so a variant is the
// same struct with one field swapped.
type Stmt struct {
	Name string // what it does, e.g. "relay: complete under the current token"
	SQL  string
	// Replaces is the lesson statement a mistake stands in for; nil for a
	// statement the lesson teaches.
	Replaces *Stmt
	// Mistake says in one phrase the guard the statement lost or the change
	// it made, e.g. "drops the token guard AND claim_token = :token".
	Mistake string
	// Separate says the statement runs in a transaction of its own, after
	// the transaction of the statements before it in its step: a mistake
	// that splits one step in two (the unguarded claim's update).
	Separate bool `json:",omitempty"`
	// Audit marks a read the lab makes to measure a run (the figures of a
	// report), not a statement one of the lesson's actors runs.
	Audit bool
	// Postgres is the statement's own PostgreSQL text where the lesson
	// writes it differently there (a claim that takes a row lock); ""
	// means SQL runs on PostgreSQL as it is, parameters numbered (see
	// [Stmt.Text]).
	Postgres string

	pg string // the text PostgreSQL runs, set when the statement is registered
}

// catalogue maps a statement's text to the Stmt that names it, so the
// ledger, which sees only text at the driver, can name what ran.
var catalogue = map[string]*Stmt{}

// named registers s in the catalogue and returns it. Every Stmt in this
// package is declared through named (or mistake or audit), once.
func named(name, sqlText string) Stmt {
	return register(Stmt{Name: name, SQL: sqlText})
}

// audit registers a read the lab makes to measure a run.
func audit(name, sqlText string) Stmt {
	return register(Stmt{Name: name, SQL: sqlText, Audit: true})
}

// mistake registers a statement that replaces the lesson's statement
// lesson, saying in change what it gets wrong.
func mistake(lesson *Stmt, change, name, sqlText string) Stmt {
	return register(Stmt{Name: name, SQL: sqlText, Replaces: lesson, Mistake: change})
}

// omitted declares a mistake that leaves the lesson's statement lesson out:
// the step does not run at all. It has no text; the service that would run
// it tells the ledger it was left out (see [Ledger.omit]).
func omitted(lesson *Stmt, change, name string) Stmt {
	return Stmt{Name: name, Replaces: lesson, Mistake: change}
}

// Omitted reports whether s is a step a mistake leaves out: it has no text.
func (s Stmt) Omitted() bool { return s.SQL == "" && s.Replaces != nil }

// namedOn is [named] for a statement the lesson writes differently on
// PostgreSQL: it runs there as pgText, not as sqliteText with its
// parameters numbered.
func namedOn(name, sqliteText, pgText string) Stmt {
	return register(Stmt{Name: name, SQL: sqliteText, Postgres: pgText})
}

// auditOn is [audit] with a PostgreSQL text of its own (see [namedOn]).
func auditOn(name, sqliteText, pgText string) Stmt {
	return register(Stmt{Name: name, SQL: sqliteText, Postgres: pgText, Audit: true})
}

// auditOf is the lab's read that goes with a mistake in place of the
// read lesson that goes with the lesson's statement (the plan of the
// mistake's select, say): swapped in with the mistake, it reads what ran.
func auditOf(lesson *Stmt, change, name, sqliteText, pgText string) Stmt {
	return register(Stmt{Name: name, SQL: sqliteText, Postgres: pgText, Audit: true, Replaces: lesson, Mistake: change})
}

// mistakeOn is [mistake] with a PostgreSQL text of its own (see [namedOn]).
func mistakeOn(lesson *Stmt, change, name, sqliteText, pgText string) Stmt {
	return register(Stmt{Name: name, SQL: sqliteText, Postgres: pgText, Replaces: lesson, Mistake: change})
}

// separate marks s as run in a transaction of its own (see
// [Stmt.Separate]).
func separate(s Stmt) Stmt {
	s.Separate = true
	catalogue[s.SQL].Separate = true // the catalogue's entry for both texts
	return s
}

func register(s Stmt) Stmt {
	s.pg = postgresText(s.SQL, s.Postgres)
	for _, text := range []string{s.SQL, s.pg} {
		if prev, dup := catalogue[text]; dup {
			panic(fmt.Sprintf("store: statements %q and %q have the same text", prev.Name, s.Name))
		}
	}
	c := s
	catalogue[s.SQL] = &c
	catalogue[s.pg] = &c
	return s
}

// Catalogue returns every statement this package declares, by name.
func Catalogue() []Stmt {
	out := make([]Stmt, 0, len(catalogue))
	seen := map[*Stmt]bool{}
	for _, s := range catalogue {
		if !seen[s] {
			seen[s] = true
			out = append(out, *s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ledger records every statement executed on the connections of one run, at
// the driver, the one place every statement passes: its text, how many
// times it ran, the rows it affected (or returned, for a read), and how
// often it failed. It also records the shape of each transaction: which
// statements ran together, and whether they committed. A Ledger is safe for
// concurrent use by all of a run's connections; the zero value is ready.
type Ledger struct {
	mu      sync.Mutex
	byKey   map[string]*LedgerEntry
	order   []string
	txByKey map[string]*LedgerTx
	txOrder []string
	extra   map[string]Stmt
}

// LedgerEntry is one statement text and what it did over a run.
type LedgerEntry struct {
	Stmt   Stmt   // named from the catalogue, or Name "" for text the catalogue does not hold
	Text   string // the text that ran, in the engine's dialect ("" for an omitted step)
	Runs   int    // executions, including failed ones
	Rows   int64  // rows affected by writes, or returned by reads
	Failed int    // executions that returned an error (SQLITE_BUSY included)
	// Skipped counts the times an omitted step (see [Stmt.Omitted]) would
	// have run: its Runs stay 0.
	Skipped int
}

// LedgerTx is one shape of transaction: the statements that ran in it, in
// order (repeats folded), and how many such transactions committed or
// rolled back.
type LedgerTx struct {
	Statements []string // statement names, or the first line of unnamed text
	Committed  int
	RolledBack int
}

// Name makes the ledger name statements that are not in the catalogue,
// such as an engineer's own claim SQL read from a file.
func (l *Ledger) Name(stmts ...Stmt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.extra == nil {
		l.extra = map[string]Stmt{}
	}
	for _, s := range stmts {
		// On PostgreSQL the driver sees the text with its parameters
		// numbered: name that text too.
		l.extra[s.SQL] = s
		l.extra[postgresText(s.SQL, s.Postgres)] = s
	}
}

// lookup names text; the caller holds l.mu.
func (l *Ledger) lookup(text string) Stmt {
	if s, ok := l.extra[text]; ok {
		return s
	}
	if s, ok := catalogue[text]; ok {
		return *s
	}
	return Stmt{SQL: text}
}

// record notes one execution of text that affected or returned rows.
func (l *Ledger) record(text string, rows int64, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]*LedgerEntry{}
	}
	e, ok := l.byKey[text]
	if !ok {
		e = &LedgerEntry{Stmt: l.lookup(text), Text: text}
		l.byKey[text] = e
		l.order = append(l.order, text)
	}
	e.Runs++
	e.Rows += rows
	if err != nil {
		e.Failed++
	}
}

// omit notes that the omitted step s was left out once.
func (l *Ledger) omit(s Stmt) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]*LedgerEntry{}
	}
	key := "\x00omitted:" + s.Name
	e, ok := l.byKey[key]
	if !ok {
		e = &LedgerEntry{Stmt: s}
		l.byKey[key] = e
		l.order = append(l.order, key)
	}
	e.Skipped++
}

// addRows adds rows a read returned after its execution was recorded.
func (l *Ledger) addRows(text string, rows int64) {
	if l == nil || rows == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byKey[text]; ok {
		e.Rows += rows
	}
}

// recordTx notes one finished transaction that ran texts in order.
func (l *Ledger) recordTx(texts []string, committed bool) {
	if l == nil || len(texts) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var names []string
	for _, t := range texts {
		s := l.lookup(t)
		n := s.Name
		switch {
		case n == "":
			n = firstLine(t)
		case s.Mistake != "" && !strings.Contains(n, "MISTAKE"):
			n = "MISTAKE: " + n
		}
		if len(names) == 0 || names[len(names)-1] != n {
			names = append(names, n)
		}
	}
	key := strings.Join(names, "\x00")
	if l.txByKey == nil {
		l.txByKey = map[string]*LedgerTx{}
	}
	tx, ok := l.txByKey[key]
	if !ok {
		tx = &LedgerTx{Statements: names}
		l.txByKey[key] = tx
		l.txOrder = append(l.txOrder, key)
	}
	if committed {
		tx.Committed++
	} else {
		tx.RolledBack++
	}
}

// Merge adds what another process's ledger recorded (its [Ledger.Entries]
// and [Ledger.Transactions], sent over a pipe) to l, as if those
// statements had run on one of l's connections: counts add up by text, and
// each text is named from l's catalogue and names, not the sender's.
func (l *Ledger) Merge(entries []LedgerEntry, txs []LedgerTx) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]*LedgerEntry{}
	}
	for _, in := range entries {
		key, stmt := in.Text, in.Stmt
		if in.Text == "" {
			key = "\x00omitted:" + in.Stmt.Name
		} else {
			stmt = l.lookup(in.Text)
		}
		e, ok := l.byKey[key]
		if !ok {
			e = &LedgerEntry{Stmt: stmt, Text: in.Text}
			l.byKey[key] = e
			l.order = append(l.order, key)
		}
		e.Runs += in.Runs
		e.Rows += in.Rows
		e.Failed += in.Failed
		e.Skipped += in.Skipped
	}
	if l.txByKey == nil {
		l.txByKey = map[string]*LedgerTx{}
	}
	for _, in := range txs {
		key := strings.Join(in.Statements, "\x00")
		tx, ok := l.txByKey[key]
		if !ok {
			tx = &LedgerTx{Statements: append([]string(nil), in.Statements...)}
			l.txByKey[key] = tx
			l.txOrder = append(l.txOrder, key)
		}
		tx.Committed += in.Committed
		tx.RolledBack += in.RolledBack
	}
}

// Entries returns every statement text the run executed, in the order each
// first ran.
func (l *Ledger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LedgerEntry, 0, len(l.order))
	for _, k := range l.order {
		out = append(out, *l.byKey[k])
	}
	return out
}

// Transactions returns every shape of transaction the run committed or
// rolled back, in the order each first finished.
func (l *Ledger) Transactions() []LedgerTx {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]LedgerTx, 0, len(l.txOrder))
	for _, k := range l.txOrder {
		t := *l.txByKey[k]
		t.Statements = append([]string(nil), t.Statements...)
		out = append(out, t)
	}
	return out
}

// Saw reports whether the run executed exactly this text at least once.
func (l *Ledger) Saw(text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.byKey[text]
	return ok
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
