package reports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"claim.sql", "claim.sql"},
		{"Zoë's claim – ünïcode 日本.sql", "Zoë's claim – ünïcode 日本.sql"},
		{"clear\x1b[2J\x1b[H.sql", `clear\x1b[2J\x1b[H.sql`},
		{"cr\rbs\bdel\x7f.sql", `cr\rbs\x08del\x7f.sql`},
		{"tab\tnl\n.sql", `tab\tnl\n.sql`},
		{"c1\u009b2J.sql", `c1\u009b2J.sql`},
		{"bidi\u202elqs.sql", `bidi\u202elqs.sql`},
		{"zero\u200bwidth\u2028sep", `zero\u200bwidth\u2028sep`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"tag\U000E0041", `tag\U000e0041`},
		{`back\slash`, `back\slash`},
	} {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestJSONLineEscapesControls: a JSON line holds no character a terminal
// acts on, and decodes to the same value.
func TestJSONLineEscapesControls(t *testing.T) {
	t.Parallel()
	name := "x\x1b[2J\x7f\u009b\u202e\U000E0041\u200b.sql"
	var b bytes.Buffer
	if err := JSONLine(&b, map[string]string{"file": name}); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(b.String(), "\n")
	if Printable(line) != line {
		t.Errorf("JSON line holds control characters: %q", line)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(line), &back); err != nil || back["file"] != name {
		t.Errorf("decoded %q (%v), want %q", back["file"], err, name)
	}
}

// TestControlEscaper: a report's writer escapes control characters but
// tabs and line breaks, drops a CRLF's CR, and keeps a character that two
// writes cut whole.
func TestControlEscaper(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	e := &controlEscaper{w: &b}
	for _, s := range []string{"SELECT '\x1b[2J'\r\n", "\tFROM t -- Zo", "\xc3", "\xab \u202e\n"} {
		if _, err := e.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "SELECT '\\x1b[2J'\n\tFROM t -- Zoë \\u202e\n"; b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
}
