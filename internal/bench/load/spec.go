// Package load generates the bench's load: it sends purchases to a GraphQL
// endpoint as a burst, an open model (a fixed arrival rate) or a closed
// model (a fixed number of callers), and records what each request came
// to. It knows nothing of the servers it loads or of what they persist.
package load

import "time"

// Load modes.
const (
	ModeBurst  = "burst"  // every user fires at once, the seed's experiment
	ModeOpen   = "open"   // a constant arrival rate, whatever the answers take
	ModeClosed = "closed" // a fixed number of callers, each waiting for its answer
)

// Spec is the load, the same for every target of a run.
type Spec struct {
	Mode        string
	Users       int           // distinct buyers; request k is made by user k mod Users
	Attempts    int           // burst: requests per user
	Concurrency int           // burst and closed: callers at once
	Rate        float64       // open: requests a second
	Duration    time.Duration // open and closed
	Ramp        time.Duration // burst: callers start spread over this long
	MaxInFlight int           // open: requests outstanding at most; more are dropped
	Timeout     time.Duration // one request
	// Warm opens each caller's connection before the clock starts (burst
	// and closed), so the run measures the server, not TCP handshakes.
	Warm bool
}

// Planned returns how many requests the spec sends, or -1 when only time
// bounds it (closed model).
func (s Spec) Planned() int64 {
	switch s.Mode {
	case ModeBurst:
		return int64(s.Users) * int64(s.Attempts)
	case ModeOpen:
		return int64(s.Rate * s.Duration.Seconds())
	}
	return -1
}
