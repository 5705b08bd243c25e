package gatewaytest

import (
	"os"
	"testing"
)

// IdleLoopEnv names the variable that picks the path the tests' pods serve
// connections on, on or off (--idle-loop's environment twin, which a launched
// gateway reads too); unset, the gateway's default. CI runs the stream, WebSocket,
// drain, revocation and storm tests once each way.
const IdleLoopEnv = "ROOMCAST_IDLE_LOOP"

// IdleLoop is the path IdleLoopEnv asks for, "on" or "off", or "" when it is
// unset; it fails t on any other value.
func IdleLoop(t testing.TB) string {
	t.Helper()
	switch v := os.Getenv(IdleLoopEnv); v {
	case "", "on", "off":
		return v
	default:
		t.Fatalf("%s=%q: must be on or off", IdleLoopEnv, v)
		return ""
	}
}
