package scenarios

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/internal/pgtest"
	"github.com/outboxlab/outboxlab/store"
)

// hostileAnswer is a file a class might hand in for an exercise, to
// write outside the slot's table or the run.
type hostileAnswer struct{ name, text string }

// hostileAnswers are the hostile files for x on engine, each aimed at
// what the slot must not touch: the files in dir, victim's sequence and
// table (PostgreSQL), another table of the lesson, the schema, the
// session. Each is the file's last statement; a two-statement slot's
// first is the key's.
func hostileAnswers(x *Exercise, engine store.Engine, dir, victim string) []hostileAnswer {
	key := textsOn(engine, x.Key)
	own := x.Shapes[len(x.Shapes)-1].Table
	last := key[len(key)-1]
	prefix := strings.Join(key[:len(key)-1], ";\n")
	if prefix != "" {
		prefix += ";\n"
	}
	// in puts a condition into the key statement, so the file is the
	// lesson's own statement plus one hostile expression.
	in := func(cond string) string {
		if m := valuesRow.FindStringSubmatchIndex(last); m != nil {
			return last[:m[0]] + "SELECT " + last[m[2]:m[3]] + " WHERE (" + cond + ")" + last[m[1]:]
		}
		return strings.Replace(last, "WHERE ", "WHERE ("+cond+") AND ", 1)
	}
	out := []hostileAnswer{
		{"another-table", "UPDATE " + otherTable(x) + " SET " + otherColumn(x) + " = NULL"},
		{"delete", "DELETE FROM " + own},
		{"drop", "DROP TABLE " + own},
		{"select-instead", "SELECT 1"},
		{"two-statements", last + ";\nDELETE FROM " + own},
		{"unknown-parameter", in(":secret IS NOT NULL")},
	}
	if shape := x.Shapes[len(x.Shapes)-1]; shape.ReturnsID && shape.Kind != store.KindSelect {
		out = append(out,
			hostileAnswer{"returns-nothing", returning.ReplaceAllString(last, "")},
			hostileAnswer{"returns-text", returning.ReplaceAllString(last, " RETURNING Status")},
			hostileAnswer{"returns-two", returning.ReplaceAllString(last, " RETURNING OutboxMessages.Id, Status")})
	}
	if engine == store.SQLite {
		out = append(out,
			hostileAnswer{"attach", "ATTACH '" + filepath.Join(dir, "evil-attach.db") + "' AS x"},
			hostileAnswer{"vacuum-into", "VACUUM INTO '" + filepath.Join(dir, "evil-vacuum.db") + "'"},
			hostileAnswer{"pragma", "PRAGMA writable_schema = ON"},
			hostileAnswer{"load-extension", in("load_extension('" + filepath.Join(dir, "evil") + "') IS NULL")},
		)
	} else {
		out = append(out,
			hostileAnswer{"victim-sequence", in("nextval('" + victim + ".s') > 0")},
			hostileAnswer{"victim-table", in("EXISTS (SELECT 1 FROM " + victim + ".t)")},
			hostileAnswer{"pg-sleep", in("pg_sleep(0) IS NOT NULL")},
			hostileAnswer{"set-config", in("set_config('search_path', 'public', false) IS NOT NULL")},
			hostileAnswer{"authid", in("EXISTS (SELECT 1 FROM pg_authid)")},
			hostileAnswer{"data-modifying-with", "WITH gone AS (DELETE FROM " + otherTable(x) + " RETURNING 1) SELECT 1"},
			hostileAnswer{"set-role", "SET ROLE postgres"},
		)
	}
	for i := range out {
		out[i].text = prefix + out[i].text // the file: the key's statements before the last, then this one
	}
	return out
}

// returning is a statement's RETURNING clause, to its end.
var returning = regexp.MustCompile(`\s*RETURNING [^;]*$`)

// valuesRow is an INSERT's one VALUES row, on a line of its own.
var valuesRow = regexp.MustCompile(`VALUES \(([^\n]*)\)`)

// otherTable is a table of x's lesson that its slot must not write.
func otherTable(x *Exercise) string {
	for _, m := range x.Schema {
		switch {
		case m.Name == store.PaymentsOutbox.Name && x.Shapes[len(x.Shapes)-1].Table != "Payments":
			return "Payments"
		case m.Name == store.BrokerInbox.Name:
			return "accounts"
		}
	}
	return "sqlite_schema" // session 16's and 17's schema holds the slot's table alone
}

func otherColumn(x *Exercise) string {
	switch otherTable(x) {
	case "Payments":
		return "PaymentStatus"
	case "accounts":
		return "credit_cents"
	}
	return "sql"
}

// TestExerciseSandbox: every hostile file is refused for every
// exercise's slot by SQLite's check, and nothing is written outside the
// run's folder.
func TestExerciseSandbox(t *testing.T) {
	t.Parallel()
	for _, x := range Exercises() {
		t.Run(x.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := checkAnswer(context.Background(), x, store.SQLite, nil, strings.Join(textsOn(store.SQLite, x.Key), ";\n")); err != nil {
				t.Errorf("the answer key is refused: %v", err)
			}
			for _, h := range hostileAnswers(x, store.SQLite, dir, "") {
				err := checkAnswer(context.Background(), x, store.SQLite, nil, h.text)
				if !isRefusal(err) {
					t.Errorf("%s: %v, want a refusal", h.name, err)
				}
			}
			if left, _ := os.ReadDir(dir); len(left) > 0 {
				t.Errorf("hostile files wrote %v", left)
			}
		})
	}
}

// TestExerciseSandboxOnPostgres: the same on PostgreSQL, each file judged
// as a throwaway grader role in its own database; after each one the
// server's schemas, roles, databases, sequences, large objects and the
// victim's rows are as they were.
func TestExerciseSandboxOnPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	victim := pgtest.VictimSchema(t, url)
	role, err := store.CreateGraderRole(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = role.Drop(context.Background(), false) })
	before := pgtest.ServerState(t, url, victim)
	for _, x := range Exercises() {
		if err := checkAnswer(ctx, x, store.Postgres, role, strings.Join(textsOn(store.Postgres, x.Key), ";\n")); err != nil {
			t.Errorf("%s: the answer key is refused: %v", x.Name, err)
		}
		for _, h := range hostileAnswers(x, store.Postgres, t.TempDir(), victim) {
			if err := checkAnswer(ctx, x, store.Postgres, role, h.text); !isRefusal(err) {
				t.Errorf("%s/%s: %v, want a refusal", x.Name, h.name, err)
			}
			if after := pgtest.ServerState(t, url, victim); after != before {
				t.Fatalf("%s/%s changed the server:\n%s\nwas\n%s", x.Name, h.name, after, before)
			}
		}
	}
}

// checkAnswer parses text as x's file and has engine's check judge it
// (role's on PostgreSQL).
func checkAnswer(ctx context.Context, x *Exercise, engine store.Engine, role *store.GraderRole, text string) error {
	f, err := store.ParseSlotFile(x.Slot(), text)
	if err != nil {
		return err
	}
	if engine == store.Postgres {
		return role.CheckSlotFile(ctx, f)
	}
	return store.CheckSlotFile(ctx, f)
}

func isRefusal(err error) bool {
	var sfe *store.SlotFileError
	return err != nil && errors.As(err, &sfe)
}

// TestHostileAnswersAreHostile: each hostile file differs from the key
// (a hostile file that is the key would pass for the wrong reason).
func TestHostileAnswersAreHostile(t *testing.T) {
	for _, x := range Exercises() {
		key := strings.Join(textsOn(store.Postgres, x.Key), ";\n")
		for _, h := range hostileAnswers(x, store.Postgres, "/tmp", "victim") {
			if h.text == key {
				t.Errorf("%s/%s is the key", x.Name, h.name)
			}
			if strings.HasPrefix(h.name, "victim") && !strings.Contains(h.text, "victim") {
				t.Errorf("%s/%s: no hostile expression went in: %s", x.Name, h.name, fmt.Sprint(h.text))
			}
		}
	}
}
