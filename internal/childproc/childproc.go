// Package childproc ties a child process's life to the process that
// starts it: what a test or a probe starts (a QEMU, above all) must not
// outlive it when it is killed, even with SIGKILL, which runs no
// cleanup. The rack's own QEMUs, which are meant to outlive
// `hinic deploy rack`, do not use it.
//
// childproc imports only the standard library.
package childproc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Tie makes cmd, not yet started, die with this process:
//
//   - the kernel sends it SIGKILL when its parent goes (PR_SET_PDEATHSIG
//     through SysProcAttr.Pdeathsig). Linux sends it when the thread
//     that started the child exits; Go's threads live as long as the
//     process unless a goroutine exits while locked to one, which this
//     module's code never does;
//   - it leads a process group of its own, and cancelling cmd's context
//     (exec.CommandContext) kills the whole group with SIGKILL, so
//     nothing it started is left behind either. A terminal's ^C no
//     longer reaches it directly: its parent, which gets the signal,
//     cancels it, or dies and so kills it.
//
// Call KillGroup once cmd has ended (or failed) to kill what is left of
// its group on the other exit paths.
func Tie(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Cancel = func() error { return KillGroup(cmd) }
}

// KillGroup sends SIGKILL to the process group of a cmd that Tie set up
// and that started; a group already gone is no error. It is safe to
// call more than once and after Wait.
func KillGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
