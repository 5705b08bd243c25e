package replaytest

import (
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay/polltest"
)

// Condition is what Eventually polls: a predicate, or a check whose error says what
// is still wrong.
type Condition = polltest.Condition

// Eventually polls cond every few milliseconds until it holds, and fails t with what
// (and the check's last error) when within passes first. It is polltest.Eventually,
// the repository's one poll loop, under the name the tests above replay use. It is
// for states that no event announces, such as a counter settling after a connection
// closed; wherever a channel or a frame announces the state, wait on that instead.
func Eventually[C Condition](t testing.TB, within time.Duration, what string, cond C) {
	t.Helper()
	polltest.Eventually(t, within, what, cond)
}
