//go:build !linux

package main

// openFileLimit is 0 where the gateway does not read the open-file limit: without
// --max-conns-per-ip there is no per-address cap.
func openFileLimit() uint64 { return 0 }
