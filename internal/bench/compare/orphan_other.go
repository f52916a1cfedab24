//go:build !linux

package compare

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal:
// a bench that is killed leaves its servers running there.
func dieWithParent(*exec.Cmd) {}
