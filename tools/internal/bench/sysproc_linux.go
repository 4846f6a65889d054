package bench

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the benchmark process
// dies, so an interrupted run leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
