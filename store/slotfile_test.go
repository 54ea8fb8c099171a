package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"
)

func TestClaimFileSplitStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		text   string
		want   []string
		params [][]string
		posit  []bool // each statement's Positional, when given
		err    string
	}{
		{name: "Positional", text: "SELECT ?1; SELECT '?' -- ?\n, [a?]; SELECT ?", want: []string{"SELECT ?1", "SELECT '?' -- ?\n, [a?]", "SELECT ?"}, posit: []bool{true, false, true}},
		{name: "Two", text: "SELECT 1; UPDATE t SET a = :id", want: []string{"SELECT 1", "UPDATE t SET a = :id"}, params: [][]string{nil, {"id"}}},
		{name: "TrailingSemicolonAndBlank", text: "SELECT 1;\n\n;  \n", want: []string{"SELECT 1"}},
		{name: "LineCommentWithSemicolon", text: "-- a; b\nSELECT 1; -- c; d\n", want: []string{"-- a; b\nSELECT 1"}},
		{name: "OnlyComments", text: "-- x;\n/* y; */\n", want: nil},
		{name: "BlockCommentWithSemicolon", text: "SELECT /* ; */ 1; SELECT 2", want: []string{"SELECT /* ; */ 1", "SELECT 2"}},
		{name: "UnclosedBlockCommentRunsToEnd", text: "SELECT 1 /* ; SELECT 2", want: []string{"SELECT 1 /* ; SELECT 2"}},
		{name: "StringWithSemicolon", text: "SELECT 'a;b'; SELECT 'it''s;'", want: []string{"SELECT 'a;b'", "SELECT 'it''s;'"}},
		{name: "QuotedIdentifiers", text: `SELECT "a;b", [c;d], ` + "`e;f`" + `; SELECT 2`, want: []string{`SELECT "a;b", [c;d], ` + "`e;f`", "SELECT 2"}},
		{name: "ParamsOutsideStringsOnly", text: "UPDATE t SET a = ':id' WHERE b = @worker -- :id\n AND c = $until", want: []string{"UPDATE t SET a = ':id' WHERE b = @worker -- :id\n AND c = $until"}, params: [][]string{{"worker", "until"}}},
		{name: "DashesInsideString", text: "SELECT '--;'; SELECT 2", want: []string{"SELECT '--;'", "SELECT 2"}},
		{name: "UnterminatedString", text: "SELECT 'abc; UPDATE", err: "unterminated string"},
		{name: "UnterminatedIdentifier", text: `SELECT "abc`, err: "unterminated quoted identifier"},
		{name: "NulByte", text: "SELECT 1\x00; DROP TABLE x", err: "NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SplitStatements(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for i, s := range got {
				texts = append(texts, s.SQL)
				if tt.posit != nil && s.Positional != tt.posit[i] {
					t.Errorf("statement %d Positional = %v, want %v", i, s.Positional, tt.posit[i])
				}
				if tt.params != nil && !reflect.DeepEqual(s.Params, tt.params[i]) {
					t.Errorf("statement %d params = %q, want %q", i, s.Params, tt.params[i])
				}
			}
			if !reflect.DeepEqual(texts, tt.want) {
				t.Errorf("got %q, want %q", texts, tt.want)
			}
		})
	}
}

const (
	lessonSelect = `SELECT Id FROM OutboxMessages WHERE Status = 'Pending' OR (Status = 'Processing' AND LockedUntilUtc <= :now) ORDER BY CreatedAtUtc, Id LIMIT 1`
	lessonUpdate = `UPDATE OutboxMessages SET Status = 'Processing', LockedBy = :worker, LockedUntilUtc = :until WHERE Id = :id AND Status = 'Pending'`
)

func TestClaimFileCode(t *testing.T) {
	t.Parallel()
	tests := []struct{ text, want string }{
		{"-- top\nSELECT Id -- the id\nFROM t /* x */ WHERE a = 1", "SELECT Id\nFROM t   WHERE a = 1"},
		{"SELECT 'a\n-- not a comment\n\nb' FROM t", "SELECT 'a\n-- not a comment\n\nb' FROM t"},
		{"SELECT 1\n\n\n  -- gone\nFROM t", "SELECT 1\nFROM t"},
		{"SELECT \"a--b\", [c--d] FROM t -- e", "SELECT \"a--b\", [c--d] FROM t"},
	}
	for _, tt := range tests {
		got, err := SplitStatements(tt.text)
		if err != nil || len(got) != 1 {
			t.Fatalf("%q: %v %v", tt.text, got, err)
		}
		if got[0].Code != tt.want {
			t.Errorf("Code of %q = %q, want %q", tt.text, got[0].Code, tt.want)
		}
	}
}

func TestClaimFileCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	abs := filepath.Join(dir, "evil-abs.db")
	uri := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "evil-uri.db")}).String()
	tests := []struct {
		name string
		file string
		err  string // "" accepts
	}{
		{"Lesson", lessonSelect + ";\n" + lessonUpdate, ""},
		{"EveryRow", lessonSelect + "; UPDATE OutboxMessages SET LockedBy = LockedBy WHERE :id > 0", ""},
		{"SemicolonInString", "SELECT Id FROM OutboxMessages WHERE Payload <> ';' LIMIT 1; " + lessonUpdate, ""},
		{"AttachAbsolute", "ATTACH DATABASE '" + abs + "' AS x; " + lessonUpdate, "ATTACH"},
		{"AttachRelative", "SELECT 1; ATTACH 'evil-relative-claimfile.db' AS x; " + lessonUpdate, "two statements"},
		{"AttachRelativeSecond", lessonSelect + "; ATTACH 'evil-relative-claimfile.db' AS y -- :id", "ATTACH"},
		{"AttachURI", "ATTACH '" + uri + "' AS x; " + lessonUpdate, "ATTACH"},
		{"VacuumInto", "VACUUM INTO '" + filepath.Join(dir, "evil-vacuum.db") + "'; " + lessonUpdate, "first statement"},
		{"DropTable", "DROP TABLE Payments; " + lessonUpdate, "schema change"},
		{"DropInUpdate", lessonSelect + "; DROP TABLE OutboxMessages -- :id", "schema change"},
		{"Pragma", "PRAGMA journal_mode = DELETE; " + lessonUpdate, "PRAGMA"},
		{"UpdateOtherTable", lessonSelect + "; UPDATE Payments SET PaymentStatus = 'Paid' WHERE Id = :id", "an UPDATE of Payments"},
		{"DeleteOutbox", lessonSelect + "; DELETE FROM OutboxMessages WHERE Id = :id", "DELETE"},
		{"InsertInSelect", "INSERT INTO Payments (IdempotencyKey, AmountCents, CreatedAtUtc, UpdatedAtUtc) VALUES ('x', 1, '', ''); " + lessonUpdate, "INSERT"},
		{"TwoSelects", lessonSelect + "; SELECT Id FROM OutboxMessages WHERE Id = :id", "no update"},
		{"SelectWithReturningUpdate", "UPDATE OutboxMessages SET Status = 'x' RETURNING Id; " + lessonUpdate, "read-only SELECT"},
		{"Recursive", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c; " + lessonUpdate, "recursive"},
		{"Begin", "BEGIN; " + lessonUpdate, "transaction"},
		{"NoIDChangesEveryRow", lessonSelect + "; UPDATE OutboxMessages SET LockedBy = :worker -- :id", ""},
		{"OneStatement", ProductionClaim.SQL, ""},
		{"OneStatementSelect", lessonSelect, "read as the claim in one statement): must be an UPDATE of OutboxMessages"},
		{"OneStatementNoReturning", strings.TrimSuffix(ProductionClaim.SQL, "RETURNING Id"), "must return one column, the message's Id"},
		{"OneStatementWritesPayments", "UPDATE Payments SET PaymentStatus = 'Paid' RETURNING Id", "an UPDATE of Payments"},
		{"ThreeStatements", lessonSelect + "; " + lessonSelect + "; " + lessonUpdate, "or one statement (an UPDATE of OutboxMessages"},
		{"CrossJoinTooSlow", "WITH t(x) AS (VALUES (1),(2),(3),(4),(5),(6),(7),(8),(9),(10)) SELECT a.x FROM t a, t b, t c, t d, t e, t f, t g, t h, t i ORDER BY random() LIMIT 1; " + lessonUpdate, "took longer than"},
		{"SelectsText", "SELECT 'abc'; " + lessonUpdate, "an integer"},
		{"SelectsTwoColumns", "SELECT Id, Status FROM OutboxMessages LIMIT 1; " + lessonUpdate, "one column"},
		{"Empty", "", "found 0"},
		{"OnlyComments", "-- SELECT 1;\n/* UPDATE x; */", "found 0"},
		{"SyntaxError", "SELEC Id FROM OutboxMessages; " + lessonUpdate, "could not run it"},
		{"DashLineInString", "SELECT Id FROM OutboxMessages WHERE Payload <> 'a\n-- b' LIMIT 1; " + lessonUpdate, "starts with '--'"},
		{"HugeBlob", "SELECT length(zeroblob(100000000)); " + lessonUpdate, "too big"},
		{"LoadExtensionInSelect", "SELECT load_extension('" + filepath.Join(dir, "evil.so") + "'); " + lessonUpdate, "authorizer refused the function load_extension"},
		{"LoadExtensionInUpdate", lessonSelect + "; UPDATE OutboxMessages SET LockedBy = load_extension('evil') WHERE Id = :id", "authorizer refused the function load_extension"},
		{"LoadExtensionUpperCase", "SELECT Id FROM OutboxMessages WHERE LOAD_EXTENSION('evil') IS NULL LIMIT 1; " + lessonUpdate, "authorizer refused the function load_extension"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cf, err := ParseSlotFile(ClaimSlot, tt.file)
			if err == nil {
				err = CheckSlotFile(context.Background(), cf)
			}
			var cfe *SlotFileError
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			case err != nil && !errors.As(err, &cfe):
				t.Fatalf("err = %T %v, want a *SlotFileError", err, err)
			}
		})
	}
	t.Cleanup(func() {
		for _, name := range []string{abs, filepath.Join(dir, "evil-uri.db"), filepath.Join(dir, "evil-vacuum.db"), "evil-relative-claimfile.db"} {
			if _, err := os.Stat(name); err == nil {
				t.Errorf("a refused claim file created %s", name)
			}
		}
	})
}

// TestAuthorizerFunctionRule: SQLite presents a function call with arg1
// NULL and the function's name in arg2; the rule reads arg2, so
// load_extension is refused in every spelling and other functions pass.
func TestAuthorizerFunctionRule(t *testing.T) {
	t.Parallel()
	g := &guardConn{file: &SlotFile{Slot: ClaimSlot}, mode: modeSlot}
	for _, tt := range []struct {
		name string
		want sqlite.AuthorizerReturnCode
	}{
		{"load_extension", sqlite.AuthorizerDeny},
		{"Load_Extension", sqlite.AuthorizerDeny},
		{"lower", sqlite.AuthorizerOK},
		{"max", sqlite.AuthorizerOK},
	} {
		if got := g.authorize(sqlite.AuthFunction, "", tt.name, "", ""); got != tt.want {
			t.Errorf("function %s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if !strings.Contains(g.denied, "load_extension") && !strings.Contains(g.denied, "Load_Extension") {
		t.Errorf("the refusal does not name the function: %q", g.denied)
	}
}

// TestUntrustedConnection checks the guard on a run's own connections: a
// claim text compiles under the claim policy, and nothing may attach.
func TestUntrustedConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	evil := filepath.Join(dir, "evil.db")
	cf := &SlotFile{Slot: ClaimSlot, Texts: []string{"ATTACH '" + evil + "' AS x", lessonUpdate}}
	cfg := DefaultConfig
	cfg.SlotFile = cf
	cfg.Ledger = &Ledger{}
	db, err := Open(ctx, filepath.Join(dir, "lab.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx, PaymentsOutbox, OutboxLeasing); err != nil {
		t.Fatalf("the lab's own DDL must run on a guarded connection: %v", err)
	}
	if _, err := db.sql.ExecContext(ctx, cf.Texts[0]); err == nil {
		t.Error("the claim file's ATTACH ran")
	}
	if _, err := db.sql.ExecContext(ctx, "ATTACH '"+evil+"' AS y"); err == nil {
		t.Error("an ATTACH ran on a guarded connection")
	}
	if _, err := db.sql.ExecContext(ctx, cf.Texts[1], append(claimArgs(time.Now(), OutboxLeaseFor("w", time.Now(), time.Second)), sql.Named("id", 1))...); err != nil {
		t.Errorf("the claim file's UPDATE: %v", err)
	}
	if _, err := os.Stat(evil); err == nil {
		t.Error("the ATTACH created a file")
	}
	// Only the catalogue's statements get the lab's policy: any other text
	// on a guarded connection may do nothing at all.
	for _, text := range []string{"CREATE TABLE planted (x)", "SELECT Payload FROM OutboxMessages LIMIT 1", "DELETE FROM OutboxMessages"} {
		if _, err := db.sql.ExecContext(ctx, text); err == nil || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("%q on a guarded connection: err = %v, want not authorized", text, err)
		}
	}
}

// TestSlotHeapLimit: SQLite counts its memory in this process, and once
// a connection that may run a claim file opens, all of SQLite's memory is
// bounded by SlotHeapLimit. A claim statement that holds forty 8 MB
// blobs at once (max()'s arguments, each under SQLITE_LIMIT_LENGTH, are
// all materialized before the call: 320 MB) is stopped by that limit and
// refused as memory, the statement named: the refusal's reason says which
// limit stopped it, so it fails were SlotStatementTimeout first. (No
// timing is asserted: in milliseconds idle, it took 1.7 s in one loaded
// CI run. The test this replaces sorted 127 such values, and accepted
// either refusal.)
func TestSlotHeapLimit(t *testing.T) {
	t.Parallel()
	if !memoryAccounted {
		t.Fatal("SQLite does not count its memory: its heap limit cannot hold")
	}
	blobs := make([]string, 40)
	for i := range blobs {
		blobs[i] = fmt.Sprintf("zeroblob(8000000) || '%d'", i)
	}
	forty := "length(max(" + strings.Join(blobs, ", ") + ")) > 0"
	tests := []struct {
		name, select_, update, statement string
	}{
		{"Select", "SELECT Id FROM OutboxMessages WHERE " + forty + " LIMIT 1", lessonUpdate, "first statement"},
		{"Update", lessonSelect, "UPDATE OutboxMessages SET LockedBy = :worker, LockedUntilUtc = :until WHERE Id = :id AND " + forty, "second statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := ParseSlotFile(ClaimSlot, tt.select_+";\n"+tt.update)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = CheckSlotFile(context.Background(), cf)
			took := time.Since(began)
			var cfe *SlotFileError
			if !errors.As(err, &cfe) || cfe.Statement != tt.statement || !strings.Contains(cfe.Reason, errTooMuchMemory.Error()) {
				t.Fatalf("err = %v (after %v), want the %s refused for needing more than SQLite's heap limit", err, took, tt.statement)
			}
			if got := sqliteHeapLimit(); got != SlotHeapLimit {
				t.Errorf("SQLite's hard heap limit is %d, want %d", got, SlotHeapLimit)
			}
		})
	}
}
