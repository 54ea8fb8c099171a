package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress keeps one status line on w (meant for stderr) up to date with
// carriage returns when w is a terminal. Otherwise (a file, a pipe, a CI
// log) it writes plain lines: one when a phase starts, then at most one
// every plainEvery. A nil writer makes every method a no-op.
type progress struct {
	w     io.Writer
	tty   bool      // redraw one line with \r
	shown time.Time // when the last plain line was written
	mu    sync.Mutex
	cell  string // which cell of the matrix is running
	name  string
	done  int64
	total int64
	since time.Time
	width int // length of the last line, to blank it out
}

// plainEvery is the least time between two plain progress lines.
const plainEvery = 5 * time.Second

func newProgress(w io.Writer) *progress { return &progress{w: w, tty: isTerminal(w)} }

// isTerminal reports whether w is a terminal: an *os.File on a character
// device. A regular file, a pipe or a buffer is not.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// setCell names the cell of the matrix now running.
func (p *progress) setCell(cell string) {
	p.mu.Lock()
	p.cell = cell
	p.mu.Unlock()
}

// phase starts a named phase of total units.
func (p *progress) phase(name string, done, total int64) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.name, p.done, p.total, p.since = name, done, total, time.Now()
	p.mu.Unlock()
	p.print(true)
}

// set records progress within the phase and redraws the line.
func (p *progress) set(done int64) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.done = done
	p.mu.Unlock()
	p.print(false)
}

// follow redraws the line every 200 ms from counter until the returned
// stop function is called.
func (p *progress) follow(counter *atomic.Int64) (stop func()) {
	if p.w == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.set(counter.Load())
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
	}
}

// print draws the line; in plain mode only when a phase starts (start)
// or plainEvery has passed since the last line.
func (p *progress) print(start bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty && !start && time.Since(p.shown) < plainEvery {
		return
	}
	line := fmt.Sprintf("bench: %s: %s %d/%d", p.cell, p.name, p.done, p.total)
	if p.total > 0 {
		line += fmt.Sprintf(" (%d%%)", p.done*100/p.total)
	}
	if el := time.Since(p.since).Seconds(); el > 0.5 && p.done > 0 {
		line += fmt.Sprintf(", %.0f/s", float64(p.done)/el)
	}
	if !p.tty {
		p.shown = time.Now()
		fmt.Fprintln(p.w, line)
		return
	}
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	p.width = len(line)
	fmt.Fprint(p.w, "\r"+line+pad)
}

// finish blanks the status line so what follows starts clean.
func (p *progress) finish() {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
	}
}
