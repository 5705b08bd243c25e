package main

import (
	"fmt"
	"io"
)

// runPlan runs the capacity planner: plan.Run(args, stdout, stderr) of
// cmd/roomcastctl/internal/plan where that package is built in.
func runPlan(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "plan: not built into this binary")
	return exitUsage
}
