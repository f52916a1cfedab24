package compare

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when the bench's thread
// that started it ends: a bench killed with SIGKILL, or crashed, leaves no
// redis-server or seckill serve running on the machine. (The signal follows
// the starting thread, not the process; Go ends a thread only when a
// goroutine locked to it exits, which the bench never does.)
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
