package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stream is a shortened `go test -json` run: a package with a slow
// passing test, a failing test with a subtest slower than anything, a
// skipped test, output lines and a stray line that is not JSON.
const stream = `{"Time":"2026-12-01T10:00:00Z","Action":"start","Package":"seckill/a"}
{"Time":"2026-12-01T10:00:00.1Z","Action":"run","Package":"seckill/a","Test":"TestSlow"}
{"Time":"2026-12-01T10:00:00.1Z","Action":"output","Package":"seckill/a","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Time":"2026-12-01T10:00:03Z","Action":"pass","Package":"seckill/a","Test":"TestSlow","Elapsed":2.9}
{"Time":"2026-12-01T10:00:03Z","Action":"run","Package":"seckill/a","Test":"TestBroken"}
{"Time":"2026-12-01T10:00:08Z","Action":"fail","Package":"seckill/a","Test":"TestBroken/inner","Elapsed":5}
{"Time":"2026-12-01T10:00:08Z","Action":"fail","Package":"seckill/a","Test":"TestBroken","Elapsed":5.04}
{"Time":"2026-12-01T10:00:08Z","Action":"skip","Package":"seckill/a","Test":"TestSkipped","Elapsed":0}
{"Time":"2026-12-01T10:00:08Z","Action":"pass","Package":"seckill/a","Test":"TestQuick","Elapsed":0.01}
# seckill/b [seckill/b.test]
{"Time":"2026-12-01T10:00:09Z","Action":"fail","Package":"seckill/a","Elapsed":9}
`

func TestReport(t *testing.T) {
	single, err := read("test-single", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	// The same test in a second suite (as on the cluster) is listed
	// apart, under that suite.
	cluster, err := read("test-cluster", strings.NewReader(
		`{"Time":"2026-12-01T10:00:01Z","Action":"pass","Package":"seckill/a","Test":"TestSlow","Elapsed":4.25}`+"\n"+
			`{"Time":"2026-12-01T10:00:31Z","Action":"pass","Package":"seckill/a","Elapsed":30}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    int
		want string
	}{
		{"the slowest first, failures marked", 3, `slowest 3 of 4 tests:
    5.0s  TestBroken  seckill/a  (test-single) FAILED
    4.2s  TestSlow    seckill/a  (test-cluster)
    2.9s  TestSlow    seckill/a  (test-single)
suites (run at once): test-single 9s, test-cluster 30s
FAILED in test-single: seckill/a (its output above)
`},
		{"fewer tests than asked for", 10, `slowest 4 of 4 tests:
    5.0s  TestBroken  seckill/a  (test-single) FAILED
    4.2s  TestSlow    seckill/a  (test-cluster)
    2.9s  TestSlow    seckill/a  (test-single)
    0.0s  TestQuick   seckill/a  (test-single)
suites (run at once): test-single 9s, test-cluster 30s
FAILED in test-single: seckill/a (its output above)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			report(&b, []suite{single, cluster}, tt.n)
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadEmpty(t *testing.T) {
	s, err := read("empty", strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	report(&b, []suite{s}, 10)
	if diff := cmp.Diff("slowest 0 of 0 tests:\n", b.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestCommand runs the command: a missing file is reported and passed
// over, and it exits 0 (it must never turn make test's result).
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "test-single.json")
	if err := os.WriteFile(path, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".", "-n", "1", path, filepath.Join(dir, "missing.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("slowest: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(string(out), "TestBroken") || !strings.Contains(stderr.String(), "missing.json") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out, stderr.String())
	}
}
