package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
)

// slotCheckRows are the rows the test slots of sessions 16 to 20 are
// checked on: one event claimed under token 1, one free; one inbox row,
// one projection, one account.
const slotCheckRows = `INSERT INTO outbox_events (event_id, event_type, payload, created_at, claim_token, locked_by, lease_until) VALUES
 ('E-1', 'PaymentCreated', '{}', 1, 1, 'Relay-A', 10),
 ('E-2', 'PaymentCreated', '{}', 2, 0, NULL, NULL);
INSERT INTO consumed_events (consumer, event_id, consumed_at) VALUES ('Consumer-A', 'E-0', '2026-01-15T08:59:00.000Z');
INSERT INTO projections (entity_id, version, state, updated_at) VALUES ('ACC-1', 1, 'open', '2026-01-15T08:59:00.000Z');
INSERT INTO accounts (id, credit_cents) VALUES ('ACC-1', 0)`

// slotCase is a slot a test declares, with the statements its corpus is
// built from. A file of the slot is prefix, then one statement.
type slotCase struct {
	slot   Slot
	prefix string // the statements before the judged one, each ending in ";\n"
	good   string // the lesson's statement
	cond   string // a statement of the slot's kind with %s for a condition it evaluates
	other  string // a statement of the slot's kind that writes another table of its schema
	wrote  string // how both engines' refusals name other's write
	p      string // a text parameter of the shape
	pcol   string // a text column of the judged statement's table, to compare p with
	victim string // another table of the slot's schema, with a column Id
	seq    string // a sequence of the slot's schema on PostgreSQL that the lesson does not move
	extra  []slotCorpusCase
}

func testSlots() []slotCase {
	schema := []Migration{RelayEvents, BrokerInbox}
	return []slotCase{
		{
			slot:   ClaimSlot,
			prefix: lessonSelect + ";\n",
			good:   lessonUpdate,
			cond:   "UPDATE OutboxMessages SET LockedBy = :worker WHERE Id = :id AND (%s)",
			other:  "UPDATE Payments SET PaymentStatus = 'Paid' WHERE Id = :id",
			wrote:  "an UPDATE of payments",
			p:      "worker", pcol: "LockedBy", victim: "Payments", seq: "payments_id_seq",
		},
		{
			slot: Slot{Name: "ack", Shapes: []Shape{{Kind: KindUpdate, Table: "outbox_events", Params: []string{"id", "token", "now"}}},
				Schema: schema, CheckRows: slotCheckRows, Samples: map[string]any{"id": "E-1", "token": int64(1), "now": int64(5)}},
			good:  CompleteWithToken.SQL,
			cond:  "UPDATE outbox_events SET delivered = 1, delivered_at = :now WHERE event_id = :id AND (%s)",
			other: "UPDATE accounts SET credit_cents = 100 WHERE id = :id",
			wrote: "an UPDATE of accounts",
			p:     "id", pcol: "event_id", victim: "accounts", seq: "broker_dead_letters_dead_letter_id_seq",
			extra: []slotCorpusCase{{name: "SetToDefault", stmt: "UPDATE outbox_events SET claim_token = DEFAULT WHERE event_id = :id",
				sqliteWant: "SQLite could not run it", pgWant: "sets a column to its DEFAULT"}},
		},
		{
			slot: Slot{Name: "inbox", Shapes: []Shape{{Kind: KindInsert, Table: "consumed_events", Params: []string{"consumer", "event_id", "now"}}},
				Schema: schema, CheckRows: slotCheckRows, Samples: map[string]any{"consumer": "Consumer-A", "event_id": "E-1", "now": "2026-01-15T09:00:00.000Z"}},
			good:  RecordConsumed.SQL,
			cond:  "INSERT INTO consumed_events (consumer, event_id, consumed_at) SELECT :consumer, :event_id, :now WHERE (%s) ON CONFLICT (consumer, event_id) DO NOTHING",
			other: "INSERT INTO accounts (id, credit_cents) VALUES (:consumer, 100) ON CONFLICT (id) DO NOTHING",
			wrote: "an INSERT into accounts",
			p:     "consumer", pcol: "consumer", victim: "accounts", seq: "broker_dead_letters_dead_letter_id_seq",
		},
		{
			slot: Slot{Name: "projection", Shapes: []Shape{{Kind: KindInsert, Table: "projections", Params: []string{"entity_id", "version", "state", "now"}}},
				Schema: schema, CheckRows: slotCheckRows, Samples: map[string]any{"entity_id": "ACC-1", "version": int64(2), "state": "closed", "now": "2026-01-15T09:00:00.000Z"}},
			good: ProjectNewerVersion.SQL,
			cond: "INSERT INTO projections (entity_id, version, state, updated_at) SELECT :entity_id, :version, :state, :now WHERE (%s)" +
				" ON CONFLICT (entity_id) DO UPDATE SET version = excluded.version",
			other: "INSERT INTO accounts (id, credit_cents) VALUES (:entity_id, 1) ON CONFLICT (id) DO UPDATE SET credit_cents = 1000000",
			wrote: "an INSERT into accounts",
			p:     "entity_id", pcol: "entity_id", victim: "accounts", seq: "broker_dead_letters_dead_letter_id_seq",
		},
		{
			// broker_offers' key is an INTEGER PRIMARY KEY, an identity on
			// PostgreSQL: the lesson's INSERT takes its sequence's next
			// value, and must pass.
			slot: Slot{Name: "offer", Shapes: []Shape{{Kind: KindInsert, Table: "broker_offers", Params: []string{"event_id", "by", "now"}}},
				Schema: schema, CheckRows: slotCheckRows, Samples: map[string]any{"event_id": "E-1", "by": "Relay-A", "now": "2026-01-15T09:00:00.000Z"}},
			good:  "INSERT INTO broker_offers (event_id, payload, offered_by, offered_at) VALUES (:event_id, '{}', :by, :now)",
			cond:  "INSERT INTO broker_offers (event_id, payload, offered_by, offered_at) SELECT :event_id, '{}', :by, :now WHERE (%s)",
			other: "INSERT INTO broker_dead_letters (offer_id, consumer, event_id, payload, delivery_count, dead_lettered_at) VALUES (1, :by, :event_id, '{}', 1, :now)",
			wrote: "an INSERT into broker_dead_letters",
			p:     "event_id", pcol: "event_id", victim: "accounts", seq: "broker_dead_letters_dead_letter_id_seq",
			// An INSERT may name its own table's DEFAULT: the identity's
			// next value, in the run's own database (SQLite has no DEFAULT
			// in VALUES).
			extra: []slotCorpusCase{{name: "DefaultKey", stmt: "INSERT INTO broker_offers (offer_id, event_id, payload, offered_by, offered_at) VALUES (DEFAULT, :event_id, '{}', :by, :now)",
				sqliteWant: "SQLite could not run it", pgWant: ""}},
		},
	}
}

// slotCorpusCase is one file of a slot's corpus and what each engine's
// check says of it: "" accepts, "-" skips that engine.
type slotCorpusCase struct {
	name               string
	stmt               string // the judged statement, after the slot's prefix
	sqliteWant, pgWant string
	unparsed           bool // PostgreSQL gets stmt as it is, not through ParseSlotFile
}

// slotCorpus is the lesson's statement and the hostile ones, for sc.
func slotCorpus(sc slotCase) []slotCorpusCase {
	shape := sc.slot.Shapes[len(sc.slot.Shapes)-1]
	cond := func(c string) string { return fmt.Sprintf(sc.cond, c) }
	noKind := "compiled it to no " + strings.ToLower(shape.Kind)
	return append([]slotCorpusCase{
		{name: "Lesson", stmt: sc.good},
		{name: "Cond", stmt: cond("1 = 1")},
		{name: "WritesAnotherTable", stmt: sc.other, sqliteWant: sc.wrote, pgWant: sc.wrote},
		{name: "Delete", stmt: "DELETE FROM " + shape.Table + " WHERE " + sc.pcol + " = :" + sc.p, sqliteWant: "a DELETE from " + shape.Table, pgWant: "PostgreSQL parses it as DELETE"},
		{name: "DataModifyingWith", stmt: "WITH gone AS (DELETE FROM " + sc.victim + " RETURNING 1) " + sc.good, sqliteWant: "SQLite could not run it", pgWant: "(a data-modifying WITH)"},
		{name: "SelectInstead", stmt: "SELECT :" + sc.p, sqliteWant: noKind, pgWant: "PostgreSQL parses it as SELECT"},
		{name: "Pragma", stmt: "PRAGMA journal_mode = DELETE", sqliteWant: "PRAGMA", pgWant: "could not compile it"},
		{name: "Attach", stmt: "ATTACH 'evil-slot.db' AS x", sqliteWant: "ATTACH", pgWant: "could not compile it"},
		{name: "DropTable", stmt: "DROP TABLE " + shape.Table, sqliteWant: "schema change", pgWant: "PostgreSQL reads it as DROP TABLE"},
		{name: "LoadExtension", stmt: cond("load_extension('evil') IS NULL"), sqliteWant: "authorizer refused the function load_extension", pgWant: "does not exist"},
		{name: "PgSleep", stmt: cond("pg_sleep(0) IS NOT NULL"), sqliteWant: "no such function", pgWant: "calls pg_sleep(double precision)"},
		{name: "SetConfig", stmt: cond("set_config('search_path', 'public', false) IS NOT NULL"), sqliteWant: "no such function", pgWant: "calls set_config(text,text,boolean)"},
		{name: "NextvalOfAnotherSequence", stmt: cond("nextval('" + sc.seq + "') > 0"), sqliteWant: "no such function", pgWant: "calls nextval(regclass)"},
		{name: "ReadsAuthid", stmt: cond("EXISTS (SELECT 1 FROM pg_authid)"), sqliteWant: "no such table", pgWant: "names pg_authid; a file reads only the run's own tables"},
		{name: "ReadsActivity", stmt: cond("EXISTS (SELECT 1 FROM pg_stat_activity)"), sqliteWant: "no such table", pgWant: "names pg_stat_activity"},
		{name: "ReadsAnotherSchema", stmt: cond("EXISTS (SELECT 1 FROM information_schema.tables)"), sqliteWant: "SQLite could not run it", pgWant: "names information_schema.tables"},
		{name: "Recursive", stmt: cond("EXISTS (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c)"), sqliteWant: "recursive", pgWant: "recursive WITH"},
		{name: "UnknownParameter", stmt: cond(":secret IS NOT NULL"), sqliteWant: "uses :secret; this statement gets only", pgWant: "uses :secret; this statement gets only"},
		{name: "PositionalParameter", stmt: cond("? IS NOT NULL"), sqliteWant: "a positional parameter ?", pgWant: "a positional parameter ?"},
		{name: "TwoStatements", stmt: sc.good + ";\nSELECT 1", sqliteWant: "found", pgWant: "found"},
		{name: "TwoStatementsInOne", stmt: sc.good + "; SELECT nextval('broker_offers_offer_id_seq')", sqliteWant: "-", pgWant: "more than one statement", unparsed: true},
	}, sc.extra...)
}

// TestSlotFileKinds: each slot the test declares, a claim's, an ack's
// UPDATE, an inbox INSERT ... ON CONFLICT DO NOTHING, a projection upsert
// and an INSERT into a table with an identity key, takes the lesson's
// statement on SQLite and refuses the hostile ones, naming why.
func TestSlotFileKinds(t *testing.T) {
	t.Parallel()
	for _, sc := range testSlots() {
		for _, tt := range slotCorpus(sc) {
			if tt.sqliteWant == "-" {
				continue
			}
			t.Run(sc.slot.Name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f, err := ParseSlotFile(sc.slot, sc.prefix+tt.stmt)
				if err == nil {
					err = CheckSlotFile(context.Background(), f)
				}
				checkRefusal(t, err, tt.sqliteWant)
			})
		}
	}
}

// TestSlotFileKindsOnPostgres is TestSlotFileKinds on PostgreSQL, as a
// grader role in its own database; after each file the server's other
// schemas, sequences, large objects, roles and databases are as they
// were.
func TestSlotFileKindsOnPostgres(t *testing.T) {
	t.Parallel()
	url, victim, r := graderSandbox(t)
	ctx := context.Background()
	before := pgtest.ServerState(t, url, victim)
	for _, sc := range testSlots() {
		for _, tt := range slotCorpus(sc) {
			if tt.pgWant == "-" {
				continue
			}
			t.Run(sc.slot.Name+"/"+tt.name, func(t *testing.T) {
				f, err := ParseSlotFile(sc.slot, sc.prefix+tt.stmt)
				if tt.unparsed {
					var texts []string
					if sc.prefix != "" {
						texts = append(texts, strings.TrimSuffix(sc.prefix, ";\n"))
					}
					f, err = SlotFile{Slot: sc.slot, Texts: append(texts, tt.stmt)}, nil
				}
				if err == nil {
					err = r.CheckSlotFile(ctx, f)
				}
				checkRefusal(t, err, tt.pgWant)
				if after := pgtest.ServerState(t, url, victim); after != before {
					t.Errorf("the server changed:\n%s", lineDiffs(before, after))
				}
			})
		}
	}
}

// checkRefusal fails t unless err accepts (want "") or is a
// *SlotFileError saying want (in any case).
func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	var sfe *SlotFileError
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case want != "" && err == nil:
		t.Fatalf("accepted, want a refusal saying %q", want)
	case want != "" && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)):
		t.Fatalf("err = %v, want one saying %q", err, want)
	case err != nil && !errors.As(err, &sfe):
		t.Fatalf("err = %T %v, want a *SlotFileError", err, err)
	}
}

// TestSlotGuardAtRunTime: a run's guarded connection, not only the check,
// holds a slot file's statement to its shape: the projection slot's
// upsert runs, the same file's write of another table is refused by the
// authorizer as the statement's own fault, and any other text may do
// nothing.
func TestSlotGuardAtRunTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var projection slotCase
	for _, sc := range testSlots() {
		if sc.slot.Name == "projection" {
			projection = sc
		}
	}
	for _, tt := range []struct {
		name, text, want string
	}{
		{"Lesson", projection.good, ""},
		{"WritesAnotherTable", projection.other, "not authorized"},
		{"Delete", "DELETE FROM projections WHERE :entity_id IS NOT NULL", "not authorized"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := DefaultConfig
			cfg.SlotFile = &SlotFile{Slot: projection.slot, Texts: []string{tt.text}}
			db, err := Open(ctx, filepath.Join(t.TempDir(), "lab.db"), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Migrate(ctx, projection.slot.Schema...); err != nil {
				t.Fatalf("the lab's own DDL must run on a guarded connection: %v", err)
			}
			var args []any
			for name, v := range projection.slot.Samples {
				args = append(args, sql.Named(name, v))
			}
			_, err = db.sql.ExecContext(ctx, tt.text, args...)
			var se *SlotStatementError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("the lesson's upsert: %v", err)
			case tt.want != "" && (!errors.As(err, &se) || se.Statement != "the statement" || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %T %v, want the statement's own fault saying %q", err, err, tt.want)
			}
			if _, err := db.sql.ExecContext(ctx, "DELETE FROM accounts"); err == nil || !strings.Contains(err.Error(), "not authorized") {
				t.Errorf("another text on a guarded connection: err = %v, want not authorized", err)
			}
		})
	}
}
