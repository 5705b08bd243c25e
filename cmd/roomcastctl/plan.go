package main

import (
	"io"

	"github.com/roomcast/roomcast/cmd/roomcastctl/internal/plan"
)

// runPlan runs the capacity planner. It talks to no server: of the global flags only
// --json applies, and it is passed on.
func runPlan(args []string, g globals, stdout, stderr io.Writer) int {
	if g.json {
		args = append([]string{"--json"}, args...)
	}
	return plan.Run(args, stdout, stderr)
}
