package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// display shows one changing status line: redrawn in place on a terminal,
// else printed as a new line at most every lineEvery.
type display struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last time.Time
	open bool // a line is drawn in place and not yet ended
}

const lineEvery = 2 * time.Second

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newDisplay(w io.Writer, tty bool) *display {
	if w == nil {
		w = io.Discard
	}
	return &display{w: w, tty: tty}
}

// update shows line; force prints it even between two periodic lines.
func (d *display) update(line string, force bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tty {
		fmt.Fprintf(d.w, "\r%s\x1b[K", line)
		d.open = true
		return
	}
	if !force && time.Since(d.last) < lineEvery {
		return
	}
	d.last = time.Now()
	fmt.Fprintln(d.w, line)
}

// end finishes the line drawn in place, if any.
func (d *display) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tty && d.open {
		fmt.Fprintln(d.w)
		d.open = false
	}
}

// println prints a message on a line of its own.
func (d *display) println(format string, args ...any) {
	d.end()
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, format+"\n", args...)
}

// watchLoad redraws the progress of a load until stop is called.
func watchLoad(d *display, label string, spec loadSpec, rec *recorder) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-rec.started:
		case <-done:
			return
		}
		every := 100 * time.Millisecond
		if !d.tty {
			every = lineEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				d.update(progressLine(label, spec, rec, time.Since(rec.start)), true)
				d.end()
				return
			case <-t.C:
				d.update(progressLine(label, spec, rec, time.Since(rec.start)), false)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressLine renders the state of a load after elapsed.
func progressLine(label string, spec loadSpec, rec *recorder, elapsed time.Duration) string {
	answered, failed := rec.answered.Load(), rec.failed.Load()
	frac := 0.0
	if n := spec.planned(); n > 0 && spec.mode == ModeBurst {
		frac = float64(answered+failed) / float64(n)
	} else if spec.duration > 0 {
		frac = elapsed.Seconds() / spec.duration.Seconds()
	}
	frac = min(max(frac, 0), 1)
	const width = 20
	filled := int(frac * width)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(answered) / s
	}
	line := fmt.Sprintf("%-8s [%s] %3.0f%%  %s answered  %s/s  accepted %s  errors %s  in flight %s  p99 %s",
		label, bar, frac*100, group(answered), group(int64(rate)), group(rec.acceptedN.Load()),
		group(failed), group(rec.inFlight.Load()), fmtDur(rec.all.Quantile(0.99)))
	if d := rec.dropped.Load(); d > 0 {
		line += "  dropped " + group(d)
	}
	return line
}
