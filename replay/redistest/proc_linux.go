package redistest

import "syscall"

// sysProcAttr kills the server when the test binary dies, so that no server outlives
// a crashed or timed-out test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processGone reports whether no process has pid.
func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// exitedNoHang reaps our child pid if it has exited, and reports whether it had.
func exitedNoHang(pid int) bool {
	var ws syscall.WaitStatus
	got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return err == nil && got == pid
}
