//go:build race

package bench_test

// raceEnabled tells whether this test binary runs under the race detector.
const raceEnabled = true
