package reports

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s with every character a terminal would act on, rather than
// show, written as a Go escape: C0 controls (ESC as \x1b, CR as \r, BS as
// \x08, TAB as \t, LF as \n), DEL (\x7f), C1 controls (\u009b), Unicode
// format characters such as bidirectional overrides (\u202e) and line
// separators, and bytes that are not UTF-8 (\xff). Everything else, wide
// and accented letters too, is kept. A name is data: a student's file name
// or a snippet of their SQL cannot clear a teacher's terminal or move the
// cursor, and a table's columns stay aligned.
func Printable(s string) string { return escapeControls(s, "") }

// escapeControls is [Printable] keeping the characters in keep as they are.
func escapeControls(s, keep string) string {
	if !needsEscaping(s, keep) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !isControl(r) || strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += size
	}
	return b.String()
}

func needsEscaping(s, keep string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isControl(r) && !strings.ContainsRune(keep, r) {
			return true
		}
		i += size
	}
	return false
}

// isControl reports the characters a terminal acts on or that reorder or
// hide text: C0, DEL and C1 controls, format characters (Cf) and the line
// and paragraph separators.
func isControl(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// jsonSafe escapes, in a line of JSON, what encoding/json writes as it is
// but a terminal would act on: DEL, C1 controls and format characters
// (encoding/json already escapes C0 controls and U+2028, U+2029). The
// result is the same JSON value.
func jsonSafe(b []byte) []byte {
	s := string(b)
	if !needsEscaping(s, "\n") {
		return b
	}
	var out strings.Builder
	for _, r := range s { // valid UTF-8: json.Marshal writes invalid bytes as \ufffd
		if r != '\n' && isControl(r) && r <= 0xffff {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		if r != '\n' && isControl(r) {
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}

// utf16Pair is r above U+FFFF as its UTF-16 surrogate pair, as JSON
// escapes it.
func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// controlEscaper writes what is written to it with the control characters
// of [Printable] escaped but for tabs and line breaks, and the CR of a CRLF
// line break dropped. A report quotes what a student wrote (their claim's
// SQL, its errors); everything [Text] prints passes through one. A
// character cut between two writes is escaped whole.
type controlEscaper struct {
	w    io.Writer
	rest []byte // the start of a character the last write cut
}

func (e *controlEscaper) Write(p []byte) (int, error) {
	b := append(e.rest, p...)
	// Keep back the start of a character this write cut short; a report
	// ends with a line break, so nothing stays back at its end.
	keep := 0
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				keep = len(b) - i
			}
			break
		}
	}
	e.rest = append([]byte(nil), b[len(b)-keep:]...)
	text := strings.ReplaceAll(string(b[:len(b)-keep]), "\r\n", "\n")
	if _, err := io.WriteString(e.w, escapeControls(text, "\t\n")); err != nil {
		return 0, err
	}
	return len(p), nil
}
