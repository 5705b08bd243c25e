package replay_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// TestDescribe: a log names its backend and the address it uses for people, and never
// a credential, whether it is configured apart (Username, Password) or written into a
// seed.
func TestDescribe(t *testing.T) {
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close(context.Background()) })
	if got := mem.Describe(); got != "memory" {
		t.Errorf("memory log: %q", got)
	}
	redistest.Require(t)
	port := strconv.Itoa(redistest.FreePort(t))
	const password = "describe-secret-pw"
	for _, tc := range []struct {
		name  string
		addrs []string
		want  string
	}{
		{"one seed", []string{"127.0.0.1:" + port}, "redis at 127.0.0.1:" + port},
		{"two seeds", []string{"127.0.0.1:" + port, "127.0.0.2:" + port}, "redis at 127.0.0.1:" + port + " and 1 other seed"},
		{"three seeds", []string{"127.0.0.1:" + port, "127.0.0.2:" + port, "127.0.0.3:" + port}, "redis at 127.0.0.1:" + port + " and 2 other seeds"},
		{"userinfo in a seed", []string{"redis://roomcast:" + password + "@127.0.0.1:" + port}, "redis at 127.0.0.1:" + port},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := replay.NewRedisLog(context.Background(), replay.RedisConfig{
				Addrs: tc.addrs, Username: "roomcast", Password: password, Timeout: 100 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close(context.Background()) })
			got := l.Describe()
			if got != tc.want || strings.Contains(got, password) {
				t.Errorf("Describe() = %q, want %q", got, tc.want)
			}
		})
	}
}
