//go:build !linux

package main

import "os"

// isTerminal reports false off Linux: --log-format auto writes JSON there, and
// --log-format text asks for the start-up written for a person.
func isTerminal(*os.File) bool { return false }
