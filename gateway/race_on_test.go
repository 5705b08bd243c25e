//go:build race

package gateway_test

// raceEnabled: the race detector drops a quarter of what goes into a sync.Pool, so
// allocation counts are not exact under it.
const raceEnabled = true
