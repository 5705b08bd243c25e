package gateway_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
)

func BenchmarkEventFrame(b *testing.B) {
	for _, size := range []int{64, 1024, 8192} {
		ev := replay.Event{Room: "room-42", Epoch: "k3x9q2ab", Seq: 123456, TS: 1731312000123, Type: "chat",
			Body: json.RawMessage(`"` + strings.Repeat("x", size-2) + `"`)}
		b.Run("body="+strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				_ = gateway.EventFrame(ev)
			}
		})
	}
}
