package reports

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/outboxlab/outboxlab/lab"
)

// fitTable chooses the width of each column the table must narrow so
// that the table, borders included, is at most MaxLine columns wide (0 for
// a column left to wrap at cellWidth), and returns the widths and the
// cells (the header first) with every word wider than its column cut into
// pieces on lines of their own. The widest column that can still wrap
// between words gives a column first; only then is a word cut, never a
// word of the header and never below minColumn, and only if that makes the
// table fit: a table that cannot fit keeps its words whole (see
// splitColumns).
func fitTable(columns []string, rows [][]string) ([]int, [][]string) {
	n := len(columns)
	all := append([][]string{columns}, rows...)
	natural := make([]int, n) // the width each column takes unnarrowed
	longest := make([]int, n) // its longest word: narrower cuts words
	floor := make([]int, n)   // its longest header word, and minColumn
	for c, h := range columns {
		floor[c] = minColumn
		for _, w := range strings.Fields(h) {
			floor[c] = max(floor[c], textWidth(w))
		}
	}
	for _, row := range all {
		for c := 0; c < n && c < len(row); c++ {
			for _, line := range strings.Split(row[c], "\n") {
				natural[c] = max(natural[c], min(textWidth(line), cellWidth))
				for _, w := range strings.Fields(line) {
					longest[c] = max(longest[c], textWidth(w))
				}
			}
		}
	}
	width := append([]int(nil), natural...)
	total := func() int {
		t := 3*n + 1 // "| " and " " around each cell, and the last "|"
		for _, w := range width {
			t += w
		}
		return t
	}
	// narrow takes a column from the widest column that can narrow without
	// cutting a word or, with cut, from the widest above its floor; false
	// when there is none.
	narrow := func(cut bool) bool {
		pick := -1
		for c := range width {
			least := longest[c]
			if cut {
				least = floor[c]
			}
			if width[c] > least && (pick < 0 || width[c] > width[pick]) {
				pick = c
			}
		}
		if pick >= 0 {
			width[pick]--
		}
		return pick >= 0
	}
	for total() > MaxLine && narrow(false) {
	}
	whole := append([]int(nil), width...)
	for total() > MaxLine && narrow(true) {
	}
	if total() > MaxLine {
		width = whole // cutting words cannot make it fit: keep them whole, for the caller to split the columns
	}
	for c := range width {
		if width[c] == natural[c] {
			width[c] = 0 // not narrowed: it wraps at cellWidth, as every table's columns do
		}
	}
	out := make([][]string, len(all))
	for i, row := range all {
		out[i] = make([]string, len(row))
		for c, cell := range row {
			if c < n && longest[c] > cmp.Or(width[c], cellWidth) {
				cell = cutWords(cell, cmp.Or(width[c], cellWidth))
			}
			out[i][c] = cell
		}
	}
	return width, out
}

// minColumn is the narrowest a column gets when the table must cut words.
const minColumn = 8

// keptWhole is the longest word of a cell a column keeps whole when it
// decides whether the table fits: a longer one (a path, a timestamp) may
// be cut.
const keptWhole = 16

// tableKey is the columns a table that goes on repeats in front of each
// continuation, so that its rows can be told apart: its # column when it
// has one, else the fewest leading columns whose cells tell the rows apart
// (bench's Messages, Workers and Claim), else its first column. An
// interleaved table's rows vary by run, so its key is its first column, the
// same every run; so is a key of leading columns that would take more than
// half a line.
func tableKey(t lab.Table) []int {
	if len(t.Columns) == 0 {
		return nil
	}
	for c, name := range t.Columns {
		if name == "#" {
			return []int{c}
		}
	}
	if t.Interleaved {
		return []int{0}
	}
	need := columnNeeds(t.Columns, t.Rows)
	key, width := []int{}, 1
	for c := range t.Columns {
		if key, width = append(key, c), width+need[c]; width > MaxLine/2 {
			break
		}
		seen := map[string]bool{}
		for _, row := range t.Rows {
			seen[strings.Join(pick(row, key), "\x00")] = true
		}
		if len(seen) == len(t.Rows) {
			return key
		}
	}
	return []int{0}
}

// columnNeeds is each column's narrowest, borders included: its longest
// header word, or cell word up to keptWhole.
func columnNeeds(columns []string, rows [][]string) []int {
	need := make([]int, len(columns))
	for c, h := range columns {
		for _, w := range strings.Fields(h) {
			need[c] = max(need[c], textWidth(w))
		}
		for _, row := range rows {
			if c < len(row) {
				for _, w := range strings.Fields(row[c]) {
					need[c] = max(need[c], min(textWidth(w), keptWhole))
				}
			}
		}
		need[c] += 3
	}
	return need
}

// splitColumns groups the columns so that each group, drawn as a table of
// its own, fits MaxLine without cutting a header word or a cell word of
// keptWhole or less: the first group takes the columns in order, the key's
// among them (or in front, were they not reached), and each further group
// the key's columns in front of more columns. A table that fits is one
// group of every column.
func splitColumns(columns []string, rows [][]string, key []int) [][]int {
	need := columnNeeds(columns, rows)
	inKey, keyWidth := map[int]bool{}, 1
	for _, k := range key {
		inKey[k], keyWidth = true, keyWidth+need[k]
	}
	var groups [][]int
	var group []int
	width, more := keyWidth, 0 // more: the group's columns besides the key's
	end := func() {
		if len(groups) == 0 { // the key's columns the first group did not reach go in front
			var front []int
			for _, k := range key {
				if !slices.Contains(group, k) {
					front = append(front, k)
				}
			}
			group = append(front, group...)
		}
		groups = append(groups, group)
		group, width, more = append([]int(nil), key...), keyWidth, 0
	}
	for c := range columns {
		if inKey[c] {
			if len(groups) == 0 {
				group = append(group, c) // in its place; its width is counted
			}
			continue
		}
		if width+need[c] > MaxLine && more > 0 {
			end()
		}
		group, width, more = append(group, c), width+need[c], more+1
	}
	end()
	return groups
}

// pick is the columns of cells that group names.
func pick(cells []string, group []int) []string {
	out := make([]string, 0, len(group))
	for _, c := range group {
		if c < len(cells) {
			out = append(out, cells[c])
		} else {
			out = append(out, "")
		}
	}
	return out
}

// cutWords puts every word of cell wider than width on lines of its own,
// cut into pieces of width, keeping the other words as they were.
func cutWords(cell string, width int) string {
	var lines []string
	for _, line := range strings.Split(cell, "\n") {
		var cur []string
		for _, w := range strings.Fields(line) {
			if textWidth(w) <= width {
				cur = append(cur, w)
				continue
			}
			if len(cur) > 0 {
				lines, cur = append(lines, strings.Join(cur, " ")), nil
			}
			for textWidth(w) > width {
				cut := cutAt(w, width)
				lines, w = append(lines, w[:cut]), w[cut:]
			}
			cur = append(cur, w)
		}
		lines = append(lines, strings.Join(cur, " "))
	}
	return strings.Join(lines, "\n")
}

// cutAt is where to cut w to fit width (len(w) when it fits): after the T
// of a timestamp whenever its date fits, else after the last separator a
// reader expects a break at (/, -, :, ., _ or ,) in its second half, else
// at width; never at a number's decimal point (0.03/0. and 09).
func cutAt(w string, width int) int {
	if textWidth(w) <= width {
		return len(w)
	}
	cut := byteIndex(w, width)
	// A timestamp breaks between its date and its time of day.
	if loc := stampRE.FindStringIndex(w); loc != nil && loc[1]-1 <= cut {
		return loc[1] - 1
	}
	for i := cut - 1; i >= cut/2; i-- {
		if strings.IndexByte("/-:._,", w[i]) >= 0 && !decimalPoint(w, i) {
			return i + 1
		}
	}
	for cut > 1 && (decimalPoint(w, cut-1) || decimalPoint(w, cut)) {
		cut-- // the width falls at a decimal point: cut before the digit ahead of it
	}
	return cut
}

// decimalPoint says whether w[i] is a point between two digits, which no
// cut may separate from them.
func decimalPoint(w string, i int) bool {
	digit := func(j int) bool { return j >= 0 && j < len(w) && w[j] >= '0' && w[j] <= '9' }
	return i < len(w) && w[i] == '.' && digit(i-1) && digit(i+1)
}

// stampRE finds a timestamp's date, its T and the first digit of its time
// of day.
var stampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d`)

// textWidth is how many columns s takes: one per rune.
func textWidth(s string) int { return utf8.RuneCountInString(s) }

// byteIndex is the byte offset of s's rune number n.
func byteIndex(s string, n int) int {
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// fitLine breaks a line wider than MaxLine at word boundaries (a word too
// long for a line is cut, see cutAt). The line's lead stays on its first
// line: its indentation, an SQL comment's marker ("--" and the blanks after
// it), or, with hang, the first len(hang) characters (a field's name).
// Each continuation line starts with hang, or else the comment's lead (so
// the text stays a comment), or the indentation and two blanks.
//
// Text of several lines (a statement, a table's definition) is fitted line
// by line, its line breaks kept. A line of code that ends in an SQL comment
// and does not fit is printed as the comment, at the code's indentation,
// and then the code, so that no wrapped code line falls inside the comment.
func fitLine(s, hang string) []string {
	s = expandTabs(s)
	if strings.Contains(s, "\n") {
		var out []string
		for i, l := range strings.Split(s, "\n") {
			if i > 0 {
				hang = ""
			}
			out = append(out, fitLine(l, hang)...)
		}
		return out
	}
	if textWidth(s) <= MaxLine {
		return []string{s}
	}
	if code, comment, ok := trailingComment(s); ok && hang == "" {
		indent := s[:len(s)-len(strings.TrimLeft(s, " "))]
		return append(fitLine(indent+strings.TrimRight(comment, " "), ""), fitLine(code, hang)...)
	}
	body := strings.TrimLeft(s, " ")
	lead := s[:len(s)-len(body)]
	cont := hang
	switch {
	case strings.HasPrefix(body, "--"):
		marker := "--" + body[2:][:len(body[2:])-len(strings.TrimLeft(body[2:], " "))]
		lead, body = lead+marker, body[len(marker):]
		cont = lead
	case hang != "" && len(s) > len(hang):
		lead, body = s[:len(hang)], s[len(hang):]
	default:
		cont = lead + "  "
	}
	var out []string
	line, fresh := lead, true // fresh: line holds only its lead
	for _, w := range sqlWords(body) {
		for {
			room := MaxLine - textWidth(line)
			if !fresh {
				room--
			}
			if textWidth(w) <= room {
				break
			}
			if !fresh {
				out, line, fresh = append(out, line), cont, true
				continue
			}
			cut := cutAt(w, max(room, 1)) // a word too long for a whole line
			out, line, w = append(out, line+w[:cut]), cont, w[cut:]
		}
		if !fresh {
			line += " "
		}
		line, fresh = line+w, false
	}
	return append(out, line)
}

// trailingComment splits a line of SQL code that ends in a comment ("-- "
// outside quotes, after some code) into the code, its blanks trimmed, and
// the comment. A flag's dashes ("--keep-db") are not a comment.
func trailingComment(s string) (code, comment string, ok bool) {
	quote := rune(0)
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case strings.HasPrefix(s[i:], "-- ") || s[i:] == "--":
			code = strings.TrimRight(s[:i], " ")
			if strings.TrimSpace(code) == "" {
				return "", "", false
			}
			return code, s[i:], true
		}
	}
	return "", "", false
}

// sqlWords splits a line into its words at blanks, as strings.Fields does,
// except inside single quotes: an SQL string literal stays one word, its
// blanks as written, so a wrapped statement's literals are what ran. A
// literal opens where a quote starts a word or follows one of "(,=<>|'"; an
// apostrophe inside a word of prose ("lesson's") opens none.
func sqlWords(s string) []string {
	var words []string
	start, quoted := -1, false
	prev := ' '
	for i, r := range s {
		switch {
		case r == '\'' && (quoted || strings.ContainsRune(" \t(,=<>|'", prev)):
			quoted = !quoted // '' inside a literal closes and reopens it: still one word
			if start < 0 {
				start = i
			}
		case !quoted && (r == ' ' || r == '\t'):
			if start >= 0 {
				words, start = append(words, s[start:i]), -1
			}
		case start < 0:
			start = i
		}
		prev = r
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

// expandTabs replaces each tab with the blanks to the next stop of four
// columns: a terminal shows a tab wider than the one column it counts as.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		switch r {
		case '\t':
			n := 4 - col%4
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case '\n':
			b.WriteRune(r)
			col = 0
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}
