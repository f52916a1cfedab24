package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"seckill/internal/bench/load"
)

// Display shows one changing status line: redrawn in place on a terminal,
// else printed as a new line at most every lineEvery.
type Display struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last time.Time
	open bool // a line is drawn in place and not yet ended
}

const lineEvery = 2 * time.Second

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// NewDisplay returns a Display on w (nil: nowhere); tty redraws in place.
func NewDisplay(w io.Writer, tty bool) *Display {
	if w == nil {
		w = io.Discard
	}
	return &Display{w: w, tty: tty}
}

// Update shows line; force prints it even between two periodic lines.
func (d *Display) Update(line string, force bool) {
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

// End finishes the line drawn in place, if any.
func (d *Display) End() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tty && d.open {
		fmt.Fprintln(d.w)
		d.open = false
	}
}

// Println prints a message on a line of its own.
func (d *Display) Println(format string, args ...any) {
	d.End()
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, format+"\n", args...)
}

// Watch redraws the progress of a load until stop is called.
func Watch(d *Display, label string, spec load.Spec, rec *load.Recorder) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-rec.Started:
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
				d.Update(progressLine(label, spec, rec, time.Since(rec.Start)), true)
				d.End()
				return
			case <-t.C:
				d.Update(progressLine(label, spec, rec, time.Since(rec.Start)), false)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressLine renders the state of a load after elapsed.
func progressLine(label string, spec load.Spec, rec *load.Recorder, elapsed time.Duration) string {
	answered, failed := rec.Answered.Load(), rec.Failed.Load()
	frac := 0.0
	if n := spec.Planned(); n > 0 && spec.Mode == ModeBurst {
		frac = float64(answered+failed+rec.Skipped.Load()) / float64(n) // a buyer who sent nothing is done too
	} else if spec.Duration > 0 {
		frac = elapsed.Seconds() / spec.Duration.Seconds()
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
		label, bar, frac*100, Number(answered), Number(int64(rate)), Number(rec.AcceptedN.Load()),
		Number(failed), Number(rec.InFlight.Load()), Duration(rec.All.Quantile(0.99)))
	if d := rec.Dropped.Load(); d > 0 {
		line += "  dropped " + Number(d)
	}
	if s := rec.Skipped.Load(); s > 0 {
		line += "  sent nothing " + Number(s)
	}
	return line
}
