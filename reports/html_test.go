package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/outboxlab/outboxlab/lab"
)

func TestHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	r := session18()
	r.Scenario, r.Title, r.Verdict = "session-18-lease-expiry-after-send", "Session 18", "SAFE <design>"
	r.Checks = []lab.Check{{Name: "broker_offers", Expected: "2", Observed: "2", Passed: true}}
	r.Statements = []lab.Statement{{Name: "relay: complete under the current token", SQL: "UPDATE outbox_events SET delivered = 1 WHERE claim_token = :token", Runs: 2, Rows: 1}}
	var b bytes.Buffer
	if err := HTML(&b, r, RunInfo{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	external := regexp.MustCompile(`(?i)(src=|href="?https?:|url\(\s*["']?https?:|@import)`)
	if m := external.FindString(page); m != "" {
		t.Errorf("the page must load nothing from the network, found %q", m)
	}
	for _, want := range []string{
		`class="lane" data-actor="Relay-A"`, `class="lane" data-actor="broker"`, // the broker lane the offers need
		`class="lease expired" data-owner="Relay-A"`, `class="lease" data-owner="Relay-B"`,
		`class="ev k-fenced"`, `class="arrow offer"`, `class="crash-marker"`,
		"UPDATE outbox_events SET delivered = 1", // the fenced write's SQL, from the ledger
		"SAFE &lt;design&gt;",                    // escaped
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func TestWriteHTMLBesideReportAndIndex(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	report := filepath.Join(out, "Session-18", "Session-18-X-RunReport-20260115T090000Z.txt")
	if got := HTMLPath(report); got != strings.TrimSuffix(report, ".txt")+".html" {
		t.Fatalf("HTMLPath = %s", got)
	}
	page, err := WriteHTML(report, session18(), RunInfo{})
	if err != nil || page != HTMLPath(report) {
		t.Fatalf("WriteHTML = %s, %v", page, err)
	}
	index, err := WriteIndex(out, []IndexEntry{{Scenario: "session-18", Passed: true, Page: "Session-18/Session-18-X-RunReport-20260115T090000Z.html"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(index)
	if !strings.Contains(string(b), `href="Session-18/Session-18-X-RunReport-20260115T090000Z.html"`) || !strings.Contains(string(b), "PASS") {
		t.Errorf("index.html lacks the link and verdict:\n%s", b)
	}
}
