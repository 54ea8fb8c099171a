package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress keeps one status line on w (meant for stderr) up to date with
// carriage returns. A nil writer makes every method a no-op.
type progress struct {
	w     io.Writer
	mu    sync.Mutex
	cell  string // which cell of the matrix is running
	name  string
	done  int64
	total int64
	since time.Time
	width int // length of the last line, to blank it out
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

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
	p.print()
}

// set records progress within the phase and redraws the line.
func (p *progress) set(done int64) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.done = done
	p.mu.Unlock()
	p.print()
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

func (p *progress) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("bench: %s: %s %d/%d", p.cell, p.name, p.done, p.total)
	if p.total > 0 {
		line += fmt.Sprintf(" (%d%%)", p.done*100/p.total)
	}
	if el := time.Since(p.since).Seconds(); el > 0.5 && p.done > 0 {
		line += fmt.Sprintf(", %.0f/s", float64(p.done)/el)
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
	if p.width > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
	}
}
