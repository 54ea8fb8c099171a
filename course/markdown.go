package course

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxLine is the widest line a page of the catalogue holds, in columns
// (runes), outside fenced code blocks: SQL is never wrapped, so a fenced
// line may be wider (see [LongLines]).
const MaxLine = 120

// LongLine is a line of a page wider than [MaxLine].
type LongLine struct {
	Number int  // from 1
	Width  int  // in runes
	Fenced bool // inside a fenced code block (SQL, never wrapped)
	Text   string
}

// LongLines lists the lines of page wider than [MaxLine], each marked
// fenced or not: a line of prose or of a list over the width is a bug of
// the rendering; a fenced one is a statement's own line, which the
// catalogue prints as the lab runs it.
func LongLines(page string) []LongLine {
	var out []LongLine
	fenced := false
	for i, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if w := utf8.RuneCountInString(line); w > MaxLine {
			out = append(out, LongLine{Number: i + 1, Width: w, Fenced: fenced, Text: line})
		}
	}
	return out
}

// escaper backslash-escapes the characters that would make prose into
// Markdown it is not: emphasis, HTML tags (describe's placeholders read
// <stale owner>) and link brackets.
var escaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "<", `\<`, ">", `\>`, "[", `\[`, "]", `\]`)

// escape is a lesson's text as Markdown that prints it: a span the text
// quotes between backquotes (a command) stays a code span, as it is
// (Markdown reads no escape inside one); the rest is escaped. Backquotes
// that do not pair are escaped too.
func escape(text string) string {
	parts := strings.Split(text, "`")
	if len(parts)%2 == 0 { // an odd number of backquotes: no code span is meant
		return strings.ReplaceAll(escaper.Replace(text), "`", "\\`")
	}
	for i := 0; i < len(parts); i += 2 {
		parts[i] = escaper.Replace(parts[i])
	}
	return strings.Join(parts, "`")
}

// blockStart matches the start of a line that Markdown would read as a
// heading, a list item or a block quote rather than as a paragraph's text.
var blockStart = regexp.MustCompile(`^(#|[-+] |\d+[.)] |\d+[.)]$|=+$|-+$)`)

// prose is text as Markdown paragraphs: escaped, wrapped at width
// columns, each line after the first indented by indent, paragraphs (the
// text's blank lines) kept apart by a blank line.
func prose(text string, width int, indent string) string {
	var lines []string
	for _, line := range wrap(escape(strings.TrimSpace(text)), width-len(indent)) {
		if blockStart.MatchString(line) { // a wrapped line never opens a block of its own
			if n := strings.IndexAny(line, ".)"); n > 0 && line[0] >= '0' && line[0] <= '9' {
				line = line[:n] + `\` + line[n:] // 1\. is text; \1. would print its backslash
			} else {
				line = `\` + line
			}
		}
		if line != "" && len(lines) > 0 {
			line = indent + line
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// wrap breaks text into lines of at most width runes at spaces, keeping
// its line breaks; a word wider than width stands on a line of its own.
func wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return out
}

// code is s as an inline code span (a metric key, a flag, a name).
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// fence is sql as a fenced code block of the given language, its lines
// as they are (never wrapped).
func fence(lang, sql string) string {
	return "```" + lang + "\n" + strings.TrimSpace(sql) + "\n```\n"
}
