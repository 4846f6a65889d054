//go:build !linux

package bench

import "syscall"

// sysProcAttr is empty where Pdeathsig does not exist; Close still stops the
// server.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
