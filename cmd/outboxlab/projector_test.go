package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outboxlab/outboxlab/reports"
	"github.com/outboxlab/outboxlab/scenarios"
)

// fitJS reads, from a loaded page, what a projector shows badly: how far
// the page, or the picture's own box, scrolls sideways, the text of the picture smaller than 12 px on
// screen (a mark's own letter excepted), and every two texts of the
// picture whose boxes overlap.
const fitJS = `(() => {
  const texts = Array.from(document.querySelectorAll('#timeline text'))
    .filter(t => t.textContent.trim() !== '' && !t.classList.contains('glyph-letter'))
    .map(t => ({t: t.textContent, r: t.getBoundingClientRect(), px: parseFloat(getComputedStyle(t).fontSize) * (t.getScreenCTM() ? t.getScreenCTM().a : 1)}));
  const small = texts.filter(x => x.px < 11.9).map(x => x.t + ' ' + x.px.toFixed(1) + 'px');
  const overlaps = [];
  for (let i = 0; i < texts.length && overlaps.length < 10; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i].r, b = texts[j].r;
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5) {
        overlaps.push(JSON.stringify(texts[i].t) + ' and ' + JSON.stringify(texts[j].t));
        if (overlaps.length >= 10) { break; }
      }
    }
  }
  const inner = Array.from(document.querySelectorAll('.scroll')).map(s => s.scrollWidth - s.clientWidth);
  return {scroll: Math.max(document.documentElement.scrollWidth - window.innerWidth, ...inner, 0), small: small.slice(0, 10), overlaps: overlaps, texts: texts.length};
})()`

// fit is what fitJS reads.
type fit struct {
	Scroll   int      `json:"scroll"`
	Small    []string `json:"small"`
	Overlaps []string `json:"overlaps"`
	Texts    int      `json:"texts"`
}

// TestPagesFitAProjector loads every lesson's page (as designed) in
// headless Chromium at 1,000 and 1,400 pixels wide: nothing scrolls
// sideways, the picture's text is at least 12 px on screen, and no two of
// its labels overlap.
func TestPagesFitAProjector(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("browser test skipped: no Chromium (install Debian's chromium, or set OUTBOXLAB_CHROMIUM)")
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	dir := t.TempDir()
	// The pages load in parallel tabs; the group returns when all have,
	// before the browser closes.
	t.Run("pages", func(t *testing.T) { checkPagesFit(t, browser, dir) })
}

// checkPagesFit writes each lesson's page into dir and checks it at both
// widths, each in a tab of browser of its own.
func checkPagesFit(t *testing.T, browser context.Context, dir string) {
	for _, sc := range scenarios.All() {
		r := executeLesson(t, sc, "", 3)
		page := filepath.Join(dir, sc.Name+".html")
		f, err := os.Create(page)
		if err != nil {
			t.Fatal(err)
		}
		if err := reports.HTML(f, r, reports.RunInfo{Started: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		for _, width := range []int64{1000, 1400} {
			t.Run(fmt.Sprintf("%s/%d", sc.Name, width), func(t *testing.T) {
				t.Parallel()
				tab, cancel := chromedp.NewContext(browser)
				defer cancel()
				tab, cancelTimeout := context.WithTimeout(tab, 60*time.Second)
				defer cancelTimeout()
				if err := chromedp.Do(tab, chromedp.EmulateViewport(width, 900), chromedp.Navigate("file://"+page), chromedp.WaitVisible("#timeline")); err != nil {
					t.Fatalf("load: %v", err)
				}
				got, err := chromedp.Run(tab, chromedp.Evaluate[fit](fitJS))
				if err != nil {
					t.Fatal(err)
				}
				if got.Texts == 0 {
					t.Fatal("the picture holds no text")
				}
				if got.Scroll > 0 {
					t.Errorf("the page scrolls %d px sideways at %d px", got.Scroll, width)
				}
				if len(got.Small) > 0 {
					t.Errorf("text under 12 px: %s", strings.Join(got.Small, "; "))
				}
				if len(got.Overlaps) > 0 {
					t.Errorf("labels overlap: %s", strings.Join(got.Overlaps, "; "))
				}
			})
		}
	}
}
