package gateway

import "testing"

// TestBufPoolDropsGrownBuffers: a batch buffer that grew past maxPooledBuf (a replay
// of large events, a batch ending on a large frame) is dropped, not kept for every
// later stream to hold.
func TestBufPoolDropsGrownBuffers(t *testing.T) {
	for range 100 {
		big := make([]byte, 0, maxPooledBuf+1)
		putBuf(&big)
		if bp := bufPool.Get().(*[]byte); cap(*bp) > maxPooledBuf {
			t.Fatalf("the pool handed out a buffer of %d bytes, above its cap of %d", cap(*bp), maxPooledBuf)
		}
	}
}
