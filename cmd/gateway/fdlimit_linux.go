package main

import "golang.org/x/sys/unix"

// openFileLimit is the process's soft limit on open files (RLIMIT_NOFILE), which Go
// raises to the hard limit at start; 0 when it cannot be read or has no bound.
func openFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 0
	}
	return rl.Cur
}
