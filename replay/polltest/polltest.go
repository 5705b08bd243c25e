package polltest

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Condition is what Eventually and Until poll: a predicate, or a check whose error
// says what is still wrong.
type Condition interface{ func() bool | func() error }

// errNotYet is what a predicate that does not hold yet says.
var errNotYet = errors.New("not yet")

// maxPause bounds the pause between two checks; the first pause is a millisecond
// and each one doubles up to it.
const maxPause = 20 * time.Millisecond

// Eventually polls cond until it holds, and fails t with what (and the check's last
// error) when within passes first.
func Eventually[C Condition](t testing.TB, within time.Duration, what string, cond C) {
	t.Helper()
	if err := Until(within, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Until polls cond until it holds and returns nil, or returns the check's last
// error, saying how long it waited, when within passes first. The check runs at
// least once.
func Until[C Condition](within time.Duration, cond C) error {
	check := func() error {
		switch c := any(cond).(type) {
		case func() bool:
			if !c() {
				return errNotYet
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
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", within, err)
		}
		time.Sleep(pause) // polling is the point here: nothing announces the state
		pause = min(2*pause, maxPause)
	}
}
