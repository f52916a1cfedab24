package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer keeps what a logger wrote, for tests that look at it; the
// goroutines of a server under test may write to it at once.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CountLines returns how many lines written so far contain substr.
func (b *LogBuffer) CountLines(substr string) int {
	n := 0
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
