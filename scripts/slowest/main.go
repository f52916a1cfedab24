// Command slowest prints the slowest tests of one or more `go test -json`
// streams, and how long each stream ran. `make test` runs its suites at
// once, each writing its stream to .run/test/SUITE.json (gotestsum
// --jsonfile), and ends with this summary. Only top-level tests count (a
// subtest's time is in its parent's); a test that ran in two suites (the
// single node and the cluster) is listed once for each.
//
// It only reports: whatever it reads, it exits 0 unless it can read
// nothing at all, and make test keeps the exit status of its suites.
//
// Usage: go run ./scripts/slowest [-n 10] FILE.json...
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// event is the part of a test2json event (go doc test2json) read here.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
}

// result is one top-level test's run in one suite.
type result struct {
	Suite, Package, Test string
	Elapsed              float64
	Failed               bool
}

// suite is one stream: its name (the file's, without .json), its tests,
// the packages that failed, and when its first and last events came.
type suite struct {
	Name           string
	Results        []result
	FailedPackages []string
	First, Last    time.Time
}

// read parses one stream. Lines that are not JSON events (a stream may hold
// a build's plain output) are passed over.
func read(name string, r io.Reader) (suite, error) {
	s := suite{Name: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024) // a test may print long lines
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if !e.Time.IsZero() {
			if s.First.IsZero() || e.Time.Before(s.First) {
				s.First = e.Time
			}
			if e.Time.After(s.Last) {
				s.Last = e.Time
			}
		}
		if e.Test == "" && e.Action == "fail" && e.Package != "" {
			// A failed package: a failed test, or a build, panic or
			// timeout outside any test.
			s.FailedPackages = append(s.FailedPackages, e.Package)
		}
		if e.Test == "" || strings.Contains(e.Test, "/") || (e.Action != "pass" && e.Action != "fail") {
			continue
		}
		s.Results = append(s.Results, result{Suite: name, Package: e.Package, Test: e.Test, Elapsed: e.Elapsed, Failed: e.Action == "fail"})
	}
	return s, sc.Err()
}

// report writes the n slowest tests of suites, slowest first, each
// suite's wall time, and then, so that a failure stays in sight below the
// list, the packages that failed in each suite.
func report(w io.Writer, suites []suite, n int) {
	var all []result
	for _, s := range suites {
		all = append(all, s.Results...)
	}
	slices.SortStableFunc(all, func(a, b result) int {
		return cmp.Or(cmp.Compare(b.Elapsed, a.Elapsed), cmp.Compare(a.Package, b.Package), cmp.Compare(a.Test, b.Test))
	})
	fmt.Fprintf(w, "slowest %d of %d tests:\n", min(n, len(all)), len(all))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range all[:min(n, len(all))] {
		mark := ""
		if r.Failed {
			mark = " FAILED"
		}
		fmt.Fprintf(tw, "%7.1fs  %s\t%s\t(%s)%s\n", r.Elapsed, r.Test, r.Package, r.Suite, mark)
	}
	tw.Flush()
	var walls []string
	for _, s := range suites {
		if !s.First.IsZero() {
			walls = append(walls, fmt.Sprintf("%s %.0fs", s.Name, s.Last.Sub(s.First).Seconds()))
		}
	}
	if len(walls) > 0 {
		fmt.Fprintf(w, "suites (run at once): %s\n", strings.Join(walls, ", "))
	}
	for _, s := range suites {
		if len(s.FailedPackages) > 0 {
			fmt.Fprintf(w, "FAILED in %s: %s (its output above)\n", s.Name, strings.Join(s.FailedPackages, ", "))
		}
	}
}

func main() {
	n := flag.Int("n", 10, "how many tests to list")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: slowest [-n 10] FILE.json...")
		flag.PrintDefaults()
	}
	flag.Parse()
	var suites []suite
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "slowest: %v\n", err)
			continue
		}
		s, err := read(strings.TrimSuffix(filepath.Base(path), ".json"), f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "slowest: %s: %v\n", path, err)
		}
		suites = append(suites, s)
	}
	if len(suites) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	report(os.Stdout, suites, *n)
}
