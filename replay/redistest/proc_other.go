//go:build !linux

package redistest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }

func processGone(pid int) bool { return false }

func exitedNoHang(pid int) bool { return false }
