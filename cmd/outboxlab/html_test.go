package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/outboxlab/outboxlab/reports"
)

// updateScreenshot copies the session-18 screenshot to docs/ for the README:
// go test ./cmd/outboxlab -run TestHTMLInBrowser -count=1 -update-screenshot
var updateScreenshot = flag.Bool("update-screenshot", false, "copy the session-18 page's screenshot to docs/session-18.png")

// chromiumPath finds a Chromium to drive: $OUTBOXLAB_CHROMIUM, or Debian's
// chromium (or Chrome) on PATH; "" when there is none.
func chromiumPath() string {
	if p := os.Getenv("OUTBOXLAB_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserPage is one page the browser test loads and what its DOM must show.
type browserPage struct {
	name    string
	args    []string
	lanes   []string // every actor, one lane each
	leases  int      // one bar per successful claim
	crashAt string   // the crash marker's clock, "" for no crash
	fenced  []string // the actors of the red fenced writes (a token refused them), in order; none for none
	// refused is each write another guard refused, drawn hollow, as
	// "actor: guard" (the page's data-refusal), in order.
	refused []string
	// twice is how many messages the per-message view shows in red as
	// processed more than once (-1: the page has no such view).
	twice int
}

var browserPages = []browserPage{
	{name: "session-15-before", args: []string{"run", "session-15-competing-workers-no-claim"},
		lanes: []string{"checkout", "Worker-A", "Worker-B"}, leases: 0, twice: 6},
	{name: "session-15-after", args: []string{"run", "session-15-outbox-leasing"},
		lanes: []string{"checkout", "Worker-A", "Worker-B", "clock", "scenario"}, leases: 7, crashAt: "2026-01-15T09:00:00.000Z", twice: 0},
	{name: "session-18", args: []string{"run", "session-18-lease-expiry-after-send"},
		lanes:  []string{"checkout", "Relay-A", "Relay-B", "clock", "broker", "Inbox-Consumer-1", "Inbox-Consumer-2", "Naive-Consumer"},
		leases: 2, fenced: []string{"Relay-A"}, refused: []string{"Inbox-Consumer-1: REFUSED: old receipt"}, twice: 1},
	{name: "explore-naive-consumer", args: []string{"run", "explore", "--variant", "naive-consumer", "--bound", "3"},
		lanes: []string{"scenario", "checkout", "Relay-A", "Relay-Recovery", "clock", "broker", "Consumer-Recovery"}, leases: 3, twice: 1},
}

// pageFacts is what the test reads from a page's DOM.
type pageFacts struct {
	Lanes      []string `json:"lanes"`
	Leases     int      `json:"leases"`
	Claims     int      `json:"claims"`
	Crashes    []string `json:"crashes"`
	CrashInRun bool     `json:"crashInRun"`
	Fenced     []struct {
		Actor string `json:"actor"`
		Fill  string `json:"fill"`
	} `json:"fenced"`
	Refused []string `json:"refused"`
	Checks  int      `json:"checks"`
	Twice   int      `json:"twice"`
	Width   int      `json:"width"`
	Verdict string   `json:"verdict"`
	Detail  string   `json:"detail"`
}

const factsJS = `(() => {
  const q = s => Array.from(document.querySelectorAll(s));
  const ticks = q('svg .tick').map(t => ({t: +t.dataset.t, seg: +t.dataset.seg, x: +t.dataset.x})).sort((a, b) => a.x - b.x);
  const crashes = q('svg .ev.k-crash');
  const crashInRun = crashes.every(c => {
    const m = c.querySelector('.crash-marker');
    const box = m.getBBox(), x = box.x + box.width / 2, cx = +c.dataset.x;
    const i = ticks.findIndex(t => t.x <= cx && (ticks.indexOf(t) === ticks.length - 1 || ticks[ticks.indexOf(t) + 1].x > cx));
    const at = c.dataset.at.replace(/^.*T/, '').replace('Z', '');
    const [h, mi, s] = at.split(':');
    const ms = ((+h * 60 + +mi) * 60) * 1000 + Math.round(+s * 1000);
    return Math.abs(x - cx) < 1 && i >= 0 && ((ticks[i].t % 86400000) === ms);
  });
  const first = document.querySelector('svg .ev.k-fenced');
  if (first) { first.dispatchEvent(new Event('focus')); }
  return {
    lanes: q('svg .lane:not(.repeat)').map(l => l.dataset.actor),
    leases: q('svg rect.lease:not(.cont)').length,
    claims: q('svg .ev.k-claim').length,
    crashes: crashes.map(c => c.dataset.at),
    crashInRun: crashInRun,
    fenced: q('svg .ev.k-fenced').filter(f => f.querySelector('.fenced-mark')).map(f => ({actor: f.dataset.actor, fill: getComputedStyle(f.querySelector('.fenced-mark')).fill})),
    refused: q('svg .ev.k-fenced').filter(f => f.querySelector('.guard-mark')).map(f => f.dataset.actor + ': ' + f.dataset.refusal),
    checks: q('#checks tbody tr').length,
    twice: q('#messages tbody td.work.fail').length,
    width: document.documentElement.scrollWidth,
    verdict: document.getElementById('verdict').textContent,
    detail: document.getElementById('detail').textContent,
  };
})()`

// TestHTMLInBrowser loads the pages `run --html` writes in headless
// Chromium, offline, and asserts from the DOM what a student must see.
func TestHTMLInBrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("browser test skipped: no Chromium (install Debian's chromium, or set OUTBOXLAB_CHROMIUM)")
	}
	shots := t.TempDir()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Offline: no name resolves, so any request to the network fails.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000), // the window a page must fit
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	for _, pg := range browserPages {
		t.Run(pg.name, func(t *testing.T) {
			path := writePage(t, pg.args)
			facts, shot := loadPage(t, browser, path)
			png := filepath.Join(shots, pg.name+".png")
			if err := os.WriteFile(png, shot, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", png)
			assertFacts(t, pg, facts)
			checkStepMode(t, browser, path, pg.name == "session-18")
			if pg.name == "session-18" && *updateScreenshot {
				if err := os.WriteFile(filepath.Join("..", "..", "docs", "session-18.png"), shot, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// writePage runs the CLI with --html and returns the page it wrote.
func writePage(t *testing.T, args []string) string {
	t.Helper()
	got := runCLI(t, append(args, "--html", "--format", "json", "--out", t.TempDir())...)
	var res reports.JSONResult
	if err := json.Unmarshal([]byte(got.stdout), &res); err != nil {
		t.Fatalf("exit %d, %v: %s %s", got.code, err, got.stdout, got.stderr)
	}
	if res.HTML == "" || res.HTML != reports.HTMLPath(res.Report) {
		t.Fatalf("JSON html = %q, want the page beside %s", res.HTML, res.Report)
	}
	return res.HTML
}

// loadPage opens path in a new tab, offline, and returns its DOM facts and
// a full-page screenshot; it fails on any console error, page exception
// or request that is not for the page itself.
func loadPage(t *testing.T, browser context.Context, path string) (pageFacts, []byte) {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second)
	defer cancelTimeout()
	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(tab, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" || e.Type == "warning" || e.Type == "assert" {
				problems = append(problems, fmt.Sprintf("console %s: %v", e.Type, e.Args))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
		case *log.EventEntryAdded:
			if e.Entry.Level == "error" {
				problems = append(problems, "log error: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			if u := e.Request.URL; !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
				problems = append(problems, "network request: "+u)
			}
		}
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate("file://"+path), chromedp.WaitVisible("#timeline")); err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	facts, err := chromedp.Run(tab, chromedp.Evaluate[pageFacts](factsJS))
	if err != nil {
		t.Fatalf("read the DOM of %s: %v", path, err)
	}
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("%s: the page must load offline with no console error:\n%s", path, strings.Join(problems, "\n"))
	}
	return facts, shot
}

func assertFacts(t *testing.T, pg browserPage, f pageFacts) {
	t.Helper()
	lanes := append([]string(nil), f.Lanes...)
	want := append([]string(nil), pg.lanes...)
	sort.Strings(lanes)
	sort.Strings(want)
	if strings.Join(lanes, ",") != strings.Join(want, ",") {
		t.Errorf("lanes %v, want one per actor: %v", f.Lanes, pg.lanes)
	}
	if f.Leases != pg.leases || f.Claims != pg.leases {
		t.Errorf("%d lease bars and %d successful claims, want %d of each", f.Leases, f.Claims, pg.leases)
	}
	switch {
	case pg.crashAt == "" && len(f.Crashes) > 0:
		t.Errorf("crash markers %v, want none", f.Crashes)
	case pg.crashAt != "" && (len(f.Crashes) != 1 || f.Crashes[0] != pg.crashAt):
		t.Errorf("crash markers %v, want one at %s", f.Crashes, pg.crashAt)
	case !f.CrashInRun:
		t.Errorf("a crash marker is not drawn at its time on the clock axis")
	}
	if len(pg.fenced) > 0 {
		red := len(f.Fenced) == len(pg.fenced)
		for i := 0; red && i < len(f.Fenced); i++ {
			red = f.Fenced[i].Actor == pg.fenced[i] && f.Fenced[i].Fill == "rgb(200, 30, 30)"
		}
		if !red {
			t.Errorf("fenced writes %+v, want one by each of %v, in order, drawn red (rgb(200, 30, 30))", f.Fenced, pg.fenced)
		}
		if !strings.Contains(f.Detail, "UPDATE") || !strings.Contains(f.Detail, "Rows this event changed: 0") {
			t.Errorf("focusing the first fenced write shows %q, want its SQL and 0 rows", f.Detail)
		}
		if one := regexp.MustCompile(`\b1 (rows|times)\b`).FindString(f.Detail); one != "" {
			t.Errorf("focusing the first fenced write shows %q, which says %q", f.Detail, one)
		}
	}
	if !slices.Equal(f.Refused, pg.refused) {
		t.Errorf("writes other guards refused %q, want %q", f.Refused, pg.refused)
	}
	if f.Twice != pg.twice {
		t.Errorf("the per-message view shows %d messages processed more than once, want %d", f.Twice, pg.twice)
	}
	if f.Width > 1400 {
		t.Errorf("the page is %d pixels wide: it must fit a 1400-pixel window (the picture scrolls inside it)", f.Width)
	}
	if f.Checks == 0 || strings.TrimSpace(f.Verdict) == "" {
		t.Errorf("the checks table (%d rows) and the verdict (%q) must be under the picture", f.Checks, f.Verdict)
	}
}

// checkStepMode drives the page's step mode with the keyboard, as a
// lecturer would: the first → reveals event #1 alone, in large type, the
// leases, renewals and arrows of later events dimmed with them; the next
// reveals #2; End shows everything again.
// With parts, the page must have leases or arrows after event #2.
func checkStepMode(t *testing.T, browser context.Context, path string, parts bool) {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser)
	defer cancel()
	tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second)
	defer cancelTimeout()
	type step struct {
		Banner string `json:"banner"`
		Hidden bool   `json:"hidden"`
		Future int    `json:"future"`
		Events int    `json:"events"`
		// Parts are the leases, renewals and arrows; LaterParts those
		// of events after the one shown, DimParts those dimmed.
		Parts, LaterParts, DimParts int
	}
	read := chromedp.Evaluate[step](`(function () {
		var parts = Array.prototype.slice.call(document.querySelectorAll('.leases [data-seq], .arrows [data-seq]'));
		var m = /^#(\d+) /.exec(document.getElementById('step').textContent);
		var shown = m ? Number(m[1]) : Infinity;
		return {banner: document.getElementById('step').textContent,
			hidden: document.getElementById('step').hidden,
			future: document.querySelectorAll('svg .ev.future').length,
			events: document.querySelectorAll('svg .ev').length,
			Parts: parts.length,
			LaterParts: parts.filter(function (el) { return Number(el.dataset.seq) > shown; }).length,
			DimParts: parts.filter(function (el) { return el.classList.contains('future'); }).length};
	})()`)
	if err := chromedp.Do(tab, chromedp.Navigate("file://"+path), chromedp.WaitVisible("#timeline")); err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	var got []step
	for _, key := range []string{kb.ArrowRight, kb.ArrowRight, kb.End} {
		if err := chromedp.Do(tab, chromedp.KeyEvent(key)); err != nil {
			t.Fatalf("press a key: %v", err)
		}
		s, err := chromedp.Run(tab, read)
		if err != nil {
			t.Fatalf("step mode: %v", err)
		}
		got = append(got, s)
	}
	if first := got[0]; !strings.HasPrefix(first.Banner, "#1 ") || first.Hidden || first.Future != first.Events-1 {
		t.Errorf("after →: banner %q (hidden %v), %d of %d events dimmed; want #1 shown large and every other event dimmed",
			first.Banner, first.Hidden, first.Future, first.Events)
	}
	if second := got[1]; !strings.HasPrefix(second.Banner, "#2 ") || second.Future != second.Events-2 {
		t.Errorf("after → →: banner %q, %d of %d events dimmed; want #2", second.Banner, second.Future, second.Events)
	}
	for i, s := range got[:2] {
		if (parts && s.LaterParts == 0) || s.DimParts != s.LaterParts {
			t.Errorf("step %d: %d of %d leases, renewals and arrows dimmed; want the %d of events after the one shown",
				i+1, s.DimParts, s.Parts, s.LaterParts)
		}
	}
	if end := got[2]; !end.Hidden || end.Future != 0 || end.DimParts != 0 {
		t.Errorf("after End: banner hidden %v, %d events and %d leases or arrows dimmed; want everything shown",
			end.Hidden, end.Future, end.DimParts)
	}
}
