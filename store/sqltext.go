package store

import (
	"errors"
	"fmt"
	"strings"
)

// SQLText is one statement cut from a text of several by [SplitStatements].
type SQLText struct {
	SQL    string   // the statement, trimmed, its comments kept, without the ending ';'
	Code   string   // SQL without its comments, and without the lines they leave blank
	Line   int      // the line on which it starts (its first token), from 1
	Params []string // the named parameters it uses (:id, @id and $id all give "id"), in order of first use
	// Positional says it uses a positional parameter (? or ?NNN), which
	// binds by place, not by name.
	Positional bool
}

// HasParam reports whether the statement uses the named parameter name.
func (s SQLText) HasParam(name string) bool {
	for _, p := range s.Params {
		if strings.EqualFold(p, name) {
			return true
		}
	}
	return false
}

// ErrNulByte means a text holds a NUL byte, where SQLite would stop reading.
var ErrNulByte = errors.New("store: SQL text holds a NUL byte")

// SplitStatements cuts text into its statements at each ';' that ends one,
// as SQLite's tokenizer does: a ';' inside a -- or /* */ comment, a '...'
// string or a "...", `...` or [...] identifier does not end a statement.
// Pieces holding only blanks and comments are dropped. An unterminated
// string or identifier is an error; a /* comment may run to the end, as in
// SQLite.
func SplitStatements(text string) ([]SQLText, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, ErrNulByte
	}
	var out []SQLText
	var code codeBuilder
	cur := SQLText{}
	start, tokens := 0, false
	line := 1
	for i := 0; i < len(text); {
		c := text[i]
		next := byte(0)
		if i+1 < len(text) {
			next = text[i+1]
		}
		j := i + 1
		switch {
		case c == '-' && next == '-':
			j = skipTo(text, i, "\n", 1)
		case c == '/' && next == '*':
			j = skipTo(text, i+2, "*/", 2)
		case c == '\'' || c == '"' || c == '`' || c == '[':
			end, ok := closeQuote(text, i)
			if !ok {
				return nil, fmt.Errorf("store: line %d: unterminated %s starting %s", line, quoteKind(c), snippet(text[i:]))
			}
			j = end
		case c == ';':
			if tokens {
				cur.SQL = strings.TrimSpace(text[start:i])
				cur.Code = code.finish()
				out = append(out, cur)
			}
			code = codeBuilder{}
			cur, start, tokens = SQLText{}, i+1, false
		case c == '?':
			cur.Positional = true
		case (c == ':' || c == '@' || c == '$') && isIdentByte(next):
			j = i + 1
			for j < len(text) && isIdentByte(text[j]) {
				j++
			}
			if name := text[i+1 : j]; !cur.HasParam(name) {
				cur.Params = append(cur.Params, name)
			}
		}
		if !isBlank(c) && !(c == '-' && next == '-') && !(c == '/' && next == '*') && c != ';' && !tokens {
			tokens, cur.Line = true, line
		}
		switch {
		case c == ';':
		case c == '-' && next == '-':
			code.WriteString("\n")
		case c == '/' && next == '*':
			code.WriteString(" ")
		default:
			code.WriteString(text[i:j])
		}
		line += strings.Count(text[i:j], "\n")
		i = j
	}
	if tokens {
		cur.SQL = strings.TrimSpace(text[start:])
		cur.Code = code.finish()
		out = append(out, cur)
	}
	return out, nil
}

// skipTo returns the index just past the first end at or after from, or
// len(text) when there is none.
func skipTo(text string, from int, end string, width int) int {
	k := strings.Index(text[from:], end)
	if k < 0 {
		return len(text)
	}
	return from + k + width
}

// closeQuote returns the index just past the quote that opens at i; a
// doubled closing quote is part of the text, except in [...].
func closeQuote(text string, i int) (int, bool) {
	open := text[i]
	closing := open
	if open == '[' {
		closing = ']'
	}
	for j := i + 1; j < len(text); j++ {
		if text[j] != closing {
			continue
		}
		if closing != ']' && j+1 < len(text) && text[j+1] == closing {
			j++
			continue
		}
		return j + 1, true
	}
	return 0, false
}

func quoteKind(c byte) string {
	if c == '\'' {
		return "string"
	}
	return "quoted identifier"
}

func snippet(s string) string {
	if len(s) > 20 {
		s = s[:20] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// codeBuilder collects a statement's text without its comments.
type codeBuilder struct{ strings.Builder }

// finish returns the collected code, trimmed, without blank lines or
// trailing blanks on a line, outside of strings: a line break inside a
// quoted string is kept as it is.
func (b *codeBuilder) finish() string {
	text := b.String()
	var out strings.Builder
	lineStart, quote := 0, byte(0)
	flush := func(end int) {
		if ln := strings.TrimRight(text[lineStart:end], " \t\r\f"); strings.TrimSpace(ln) != "" {
			if out.Len() > 0 {
				out.WriteByte('\n')
			}
			out.WriteString(ln)
		}
	}
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case quote != 0:
			if c == quote || quote == '[' && c == ']' {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`' || c == '[':
			quote = c
		case c == '\n':
			flush(i)
			lineStart = i + 1
		}
	}
	flush(len(text))
	return strings.TrimSpace(out.String())
}
