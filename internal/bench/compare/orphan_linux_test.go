package compare

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChildDiesWithBench: a process the bench started (startProcess) is
// killed when the bench is killed with SIGKILL, which no handler of its
// own can answer. The bench is this test binary run again as a helper.
func TestChildDiesWithBench(t *testing.T) {
	if os.Getenv("SECKILL_ORPHAN_HELPER") != "" {
		p, err := startProcess("sleep", filepath.Join(os.Getenv("SECKILL_ORPHAN_HELPER"), "sleep.log"), exec.Command("sleep", "60"))
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString(strconv.Itoa(p.cmd.Process.Pid) + "\n")
		select {} // until killed
	}
	helper := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithBench$")
	helper.Env = append(os.Environ(), "SECKILL_ORPHAN_HELPER="+t.TempDir())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = helper.Process.Kill()
		t.Fatalf("the helper did not say its child: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("child pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the bench's child %d still runs 5 s after the bench was killed", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie nobody reaped yet does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
