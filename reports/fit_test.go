package reports

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

// TestFitLine: a line wider than MaxLine wraps at words, keeps its
// indentation (and an SQL comment's marker), and cuts a word too long for
// a line; a line that fits is left alone.
func TestFitLine(t *testing.T) {
	long := strings.Repeat("word ", 40)
	path := "/tmp/" + strings.Repeat("outboxlab-", 20) + "run.db"
	tests := []struct {
		name, line, hang string
		first            string // the first line's start
		rest             string // every other line's start
	}{
		{"Fits", "a short line", "", "a short line", ""},
		{"Words", long, "", "word word", "  word"},
		{"Indented", "    " + long, "", "    word", "      word"},
		{"SQLComment", "--   " + long, "", "--   word", "--   word"},
		{"Hanging", "Database: " + path, strings.Repeat(" ", 10), "Database: /tmp/", "          "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := fitLine(tt.line, tt.hang)
			if !strings.HasPrefix(lines[0], tt.first) {
				t.Errorf("first line %q, want it to start %q", lines[0], tt.first)
			}
			var joined []string
			for i, l := range lines {
				if n := textWidth(l); n > MaxLine {
					t.Errorf("line %d is %d columns: %q", i, n, l)
				}
				if i > 0 && !strings.HasPrefix(l, tt.rest) {
					t.Errorf("line %d %q, want it to start %q", i, l, tt.rest)
				}
				joined = append(joined, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "--")))
			}
			if got := strings.Join(strings.Fields(strings.Join(joined, " ")), ""); got != strings.Join(strings.Fields(strings.TrimPrefix(strings.TrimSpace(tt.line), "--")), "") {
				t.Errorf("the wrapped text lost or gained characters:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestFitLineKeepsSQL: a statement of several lines keeps its line
// breaks, and a code line ending in a comment that does not fit is printed
// as the comment and then the code, so no code falls inside the comment.
func TestFitLineKeepsSQL(t *testing.T) {
	comment := "-- " + strings.Repeat("why ", 20)
	tests := []struct {
		name, sql string
		want      []string
	}{
		{"LineBreaks", "CREATE TABLE t (\n    a INTEGER, -- short\n    b TEXT\n)",
			[]string{"CREATE TABLE t (", "    a INTEGER, -- short", "    b TEXT", ")"}},
		{"TrailingComment", "    claim_token INTEGER NOT NULL DEFAULT 0, " + comment + "\n    locked_by TEXT",
			[]string{"    " + strings.TrimSpace(comment), "    claim_token INTEGER NOT NULL DEFAULT 0,", "    locked_by TEXT"}},
		{"DashesInAString", "SELECT '--" + strings.Repeat("x", 130) + "'", nil},
		{"LiteralKept", "UPDATE OutboxMessages SET Status = 'Processing' WHERE Id = :id AND " + strings.Repeat("Status <> 'x' AND ", 3) +
			"Status <> 'a long literal -- with   three blanks and words that go on'",
			[]string{"UPDATE OutboxMessages SET Status = 'Processing' WHERE Id = :id AND Status <> 'x' AND Status <> 'x' AND Status <> 'x' AND",
				"  Status <> 'a long literal -- with   three blanks and words that go on'"}},
		{"DoubledQuote", "SELECT 1 WHERE a = 'it''s   " + strings.Repeat("y", 100) + " z'", []string{"SELECT 1 WHERE a =", "  'it''s   " + strings.Repeat("y", 100) + " z'"}},
		{"TabsExpanded", "\tSET a = 1,\n\t\tb = 2", []string{"    SET a = 1,", "        b = 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fitLine(tt.sql, "")
			for i, l := range got {
				if textWidth(l) > MaxLine {
					t.Errorf("line %d is %d columns", i, textWidth(l))
				}
			}
			if tt.want != nil && !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tt.want == nil && strings.HasPrefix(got[0], "--") {
				t.Errorf("a string's dashes were taken for a comment: %q", got[0])
			}
		})
	}
}

// TestTablesFit: a table too wide for MaxLine narrows its widest columns,
// wraps and, where it must, cuts a long word (a timestamp after its T), and
// a table that cannot fit without cutting its header goes on in a second
// table keyed by its first column.
func TestTablesFit(t *testing.T) {
	stamp := "2026-01-15T09:00:01.100Z"
	tests := []struct {
		name   string
		cols   []string
		row    []string
		tables int
	}{
		{"Narrow", []string{"A", "B"}, []string{"1", "2"}, 1},
		{"Wrapped", []string{"Check", "About", "Observed"}, []string{"x", strings.Repeat("long words here ", 12), stamp}, 1},
		{"Stamps", []string{"Id", "LockedUntilUtc", "ProcessedAtUtc", "More", "Even more"},
			[]string{"1", stamp, stamp, strings.Repeat("text ", 30), strings.Repeat("text ", 30)}, 1},
		{"GoesOn", []string{"Id", "AggregateKey", "Status", "LockedBy", "LockedUntilUtc", "ProcessedAtUtc", "Payment",
			"TransactionId", "Claimed by", "Processed by", "Times"},
			[]string{"1", "PAY-001", "Processed", "Worker-B", stamp, stamp, "Paid", "TXN-0001", "Worker-A", "Worker-B", "1"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			p := &printer{w: &b}
			p.table(tableOf(tt.cols, tt.row))
			if p.err != nil {
				t.Fatal(p.err)
			}
			out := b.String()
			for _, l := range strings.Split(out, "\n") {
				if textWidth(l) > MaxLine {
					t.Errorf("line of %d columns: %q", textWidth(l), l)
				}
			}
			if got := strings.Count(out, "goes on") + 1; got != tt.tables {
				t.Errorf("%d tables, want %d:\n%s", got, tt.tables, out)
			}
			if strings.Contains(out, "…") {
				t.Errorf("a cell was truncated:\n%s", out)
			}
			if strings.Contains(out, stamp[:11]) && !strings.Contains(out, stamp) && !strings.Contains(out, "| 2026-01-15T ") {
				t.Errorf("a timestamp was cut elsewhere than after its T:\n%s", out)
			}
		})
	}
}

// tableOf is a table of columns with one row.
func tableOf(columns, row []string) lab.Table {
	t := lab.Table{Columns: columns}
	cells := make([]any, len(row))
	for i, c := range row {
		cells[i] = c
	}
	t.AddRow(cells...)
	return t
}

// TestCutAt: a timestamp breaks after its T whenever its date fits the
// width; another word after a separator in its second half, else at the
// width; never at a number's decimal point; a word that fits is not cut.
func TestCutAt(t *testing.T) {
	stamp := "2026-01-15T09:00:40.000Z"
	type cut struct {
		word  string
		width int
		want  string // the piece before the cut
	}
	var tests []cut
	for width := 12; width <= 30; width++ {
		want := "2026-01-15T"
		if width >= len(stamp) {
			want = stamp // it fits: no cut
		}
		tests = append(tests, cut{stamp, width, want})
	}
	tests = append(tests,
		cut{"lease_until=" + stamp, 26, "lease_until=2026-01-15T"},
		cut{"2026-01-15", 8, "2026-01-"}, // no time of day: a separator
		cut{"part-1-short-retention.db", 20, "part-1-short-"},
		cut{"/tmp/outboxlab-run/x.db", 12, "/tmp/outboxl"}, // a separator in the first half only: at the width,
		cut{"abcdefghijklmnop", 8, "abcdefgh"},
		cut{"09:00:40.000Z", 10, "09:00:"}, // never at a decimal point: not after 40.
		cut{"0.03/0.09", 7, "0.03/"},       // bench's Lag p50/p99 printed 0.03/0. / 09
		cut{"0.03/0.16", 8, "0.03/"},       // nor inside the fraction
		cut{"123456.789", 7, "12345"},      // no separator: the width falls after the point
		cut{"123456.789", 6, "12345"},      // or just before it
	)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.word, tt.width), func(t *testing.T) {
			if got := tt.word[:cutAt(tt.word, tt.width)]; got != tt.want {
				t.Errorf("cutAt(%q, %d) cuts after %q, want after %q", tt.word, tt.width, got, tt.want)
			}
		})
	}
}

// TestFitTableCutsOnlyToFit: fitTable cuts a word only when cutting makes
// the table fit MaxLine; a table that cannot fit anyway keeps its words
// whole, for the caller to split its columns.
func TestFitTableCutsOnlyToFit(t *testing.T) {
	stamp := "2026-01-15T09:00:01.100Z"
	bench := []string{"Messages", "Workers", "Claim", "Batch", "msgs/s", "x ceiling", "Claim p50 ms", "Claim p99 ms",
		"Lag p50/p99 ms", "BUSY retries", "Longest wait ms", "Worker split", "Errors", "Dup", "Lost", "Refused", "Peak MB"}
	tests := []struct {
		name string
		cols []string
		row  []string
		cut  bool // a word of the row is cut
	}{
		{"FitsWhole", []string{"Id", "Clock"}, []string{"1", stamp}, false},
		{"FitsByWrapping", []string{"Id", "LockedUntilUtc", "ProcessedAtUtc", "More", "Even more"},
			[]string{"1", stamp, stamp, strings.Repeat("text ", 30), strings.Repeat("text ", 30)}, false},
		{"FitsByCutting", []string{"Id", "Claimed", "Locked until", "Processed", "Acked", "Expired"},
			[]string{"1", stamp, stamp, stamp, stamp, stamp}, true},
		{"CannotFit", bench, []string{"100", "2", "fetch-ahead", "1.9/50", "21693", "1.00", "0.052", "0.45", "1.20/2.37",
			"0", "0.5", "50/50%", "0", "0", "0", "0", "23"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cells := fitTable(tt.cols, [][]string{tt.row})
			var cut []string
			for c, cell := range cells[1] {
				if strings.Join(strings.Fields(cell), " ") != strings.Join(strings.Fields(tt.row[c]), " ") {
					cut = append(cut, fmt.Sprintf("%q", cell))
				}
			}
			if got := len(cut) > 0; got != tt.cut {
				t.Errorf("cut words: %v, want cuts %v", cut, tt.cut)
			}
		})
	}
}

// TestTableKey: a table that goes on repeats its key in front of each
// continuation: its # column when it has one, else the fewest leading
// columns that tell its rows apart, else (and in an interleaved table,
// whose rows vary by run) its first column.
func TestTableKey(t *testing.T) {
	filler := make([]string, 12) // columns enough that the table goes on
	for i := range filler {
		filler[i] = fmt.Sprintf("Column %02d", i)
	}
	table := func(interleaved bool, cols []string, rows ...[]string) lab.Table {
		tb := lab.Table{Interleaved: interleaved, Columns: append(cols, filler...)}
		for _, r := range rows {
			cells := append([]string(nil), r...)
			for range filler {
				cells = append(cells, "cell-content")
			}
			tb.Rows = append(tb.Rows, cells)
		}
		return tb
	}
	tests := []struct {
		name  string
		table lab.Table
		by    string // the continuation's line names it
		head  string // and its table starts with it
	}{
		{"Hash", table(false, []string{"Row", "#", "Clock"}, []string{"part 1 short", "8", "t=1"}, []string{"part 1 short", "11", "t=2"}),
			"by #,", "| # "},
		{"UniqueFirst", table(false, []string{"Id", "Status"}, []string{"1", "done"}, []string{"2", "done"}), "by Id,", "| Id "},
		{"LeadingColumns", table(false, []string{"Messages", "Workers", "Claim", "Batch"},
			[]string{"1000", "1", "indexed", "1"}, []string{"1000", "2", "indexed", "1"}, []string{"1000", "2", "fetch-ahead", "0.9/12"}),
			"by Messages, Workers and Claim,", "| Messages | Workers | Claim "},
		{"FirstRepeats", table(false, []string{"Event", "Effect"}, []string{"e20", "yes"}, []string{"e20", "yes"}), "by Event,", "| Event | Column"},
		{"Interleaved", table(true, []string{"Worker", "Id"}, []string{"Worker-A", "1"}, []string{"Worker-A", "2"}), "by Worker,", "| Worker   | Column"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeTable(&b, tt.table); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			_, after, ok := strings.Cut(out, "(The table goes on: the same rows ")
			if !ok {
				t.Fatalf("the table does not go on:\n%s", out)
			}
			if !strings.HasPrefix(after, tt.by) {
				t.Errorf("it goes on %q, want %q", strings.SplitN(after, "\n", 2)[0], tt.by)
			}
			var header string
			for _, l := range strings.Split(after, "\n") {
				if strings.HasPrefix(l, "| ") {
					header = l
					break
				}
			}
			if !strings.HasPrefix(header, tt.head) {
				t.Errorf("the continuation's header is %q, want it to start %q:\n%s", header, tt.head, out)
			}
		})
	}
}
