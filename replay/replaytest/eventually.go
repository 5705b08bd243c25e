package replaytest

import (
	"fmt"
	"testing"
	"time"
)

// Condition is what Eventually polls: a predicate, or a check whose error says what
// is still wrong.
type Condition interface{ func() bool | func() error }

// Eventually polls cond every few milliseconds until it holds, and fails t with what
// (and the check's last error) when within passes first. It is for states that no
// event announces, such as a counter settling after a connection closed; wherever a
// channel or a frame announces the state, wait on that instead.
func Eventually[C Condition](t testing.TB, within time.Duration, what string, cond C) {
	t.Helper()
	check := func() error {
		switch c := any(cond).(type) {
		case func() bool:
			if !c() {
				return fmt.Errorf("not yet")
			}
			return nil
		case func() error:
			return c()
		}
		panic("unreachable")
	}
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
			return
		}
		time.Sleep(pause) // polling is the point here: nothing announces the state
		pause = min(2*pause, 20*time.Millisecond)
	}
}
