//go:build !linux

package main

import "os"

// isTerminal reports false off Linux: -bar on still draws the bar.
func isTerminal(*os.File) bool { return false }
