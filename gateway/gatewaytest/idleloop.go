package gatewaytest

import (
	"os"
	"testing"

	"github.com/roomcast/roomcast/gateway"
)

// IdleLoopEnv names the variable that picks the path the tests' pods serve
// connections on, on or off (--idle-loop's environment twin, which a launched
// gateway reads too); unset, the gateway's default. CI runs the stream, WebSocket,
// drain, revocation and storm tests once each way.
const IdleLoopEnv = "ROOMCAST_IDLE_LOOP"

// IdleLoop is the path IdleLoopEnv asks for; it fails t on a value that is not on
// or off.
func IdleLoop(t testing.TB) gateway.IdleLoop {
	t.Helper()
	v := os.Getenv(IdleLoopEnv)
	if v == "" {
		return gateway.IdleLoopDefault
	}
	l, err := gateway.ParseIdleLoop(v)
	if err != nil {
		t.Fatalf("%s: %v", IdleLoopEnv, err)
	}
	return l
}
