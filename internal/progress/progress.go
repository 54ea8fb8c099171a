// Package progress keeps one status line of long work on stderr: redrawn
// in place on a terminal, written as a plain line at most every few
// seconds elsewhere (a file, a pipe, a CI log).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"
)

// Line keeps one status line on w (meant for stderr) up to date with
// carriage returns when w is a terminal. Otherwise (a file, a pipe, a CI
// log) it writes plain lines: one when a phase starts, then at most one
// every plainEvery. A nil Line, or one on a nil writer, does nothing.
type Line struct {
	w      io.Writer
	prefix string    // what the work is: "bench", "explore"
	tty    bool      // redraw one line with \r
	shown  time.Time // when the last plain line was written
	mu     sync.Mutex
	cell   string // which cell of the matrix is running
	name   string
	done   int64
	total  int64
	since  time.Time
	width  int // length of the last line, to blank it out
}

// plainEvery is the least time between two plain progress lines.
const plainEvery = 5 * time.Second

// New is a status line on w whose lines start with prefix.
func New(w io.Writer, prefix string) *Line { return &Line{w: w, prefix: prefix, tty: IsTerminal(w)} }

// IsTerminal reports whether w is a terminal: an *os.File whose
// descriptor a terminal holds (golang.org/x/term). A regular file, a
// pipe, a buffer or another character device (2>/dev/null) is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}

// SetCell names the cell of the matrix now running.
func (p *Line) SetCell(cell string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.cell = cell
	p.mu.Unlock()
}

// Phase starts a named phase of total units.
func (p *Line) Phase(name string, done, total int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.name, p.done, p.total, p.since = name, done, total, time.Now()
	p.mu.Unlock()
	p.print(true)
}

// Set records progress within the phase and redraws the line.
func (p *Line) Set(done int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.done = done
	p.mu.Unlock()
	p.print(false)
}

// Follow redraws the line every 200 ms from counter until the returned
// stop function is called.
func (p *Line) Follow(counter *atomic.Int64) (stop func()) {
	if p == nil || p.w == nil {
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
				p.Set(counter.Load())
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
func (p *Line) print(start bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty && !start && time.Since(p.shown) < plainEvery {
		return
	}
	line := p.prefix + ": "
	if p.cell != "" {
		line += p.cell + ": "
	}
	line += fmt.Sprintf("%s %d", p.name, p.done)
	if p.total > 0 {
		line += fmt.Sprintf("/%d (%d%%)", p.total, p.done*100/p.total)
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

// Finish blanks the status line so what follows starts clean.
func (p *Line) Finish() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
	}
}
