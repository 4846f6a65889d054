//go:build linux

package redisserver

import "syscall"

// sysProcAttr makes the kernel kill the child when the process that started
// it dies, so a crashed test or tool leaves no server behind, and puts it in
// its own process group, so a Ctrl-C reaches the starter, which stops its
// children in order, instead of every process at once.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
