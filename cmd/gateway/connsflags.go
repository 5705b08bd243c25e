package main

// connsPerIPShare: without --max-conns-per-ip, one peer address may hold a quarter of
// the open-file limit in connections that are not streams, so that one address
// trickling request bodies cannot take every file descriptor (accept then fails
// with "too many open files" and nobody, /healthz included, is answered).
const connsPerIPShare = 4

// connsPerIPFor is the per-address cap for an open-file limit: a quarter of it,
// within the flag's range (1 to 65536); 0, no cap, for an unknown limit.
func connsPerIPFor(limit uint64) int {
	if limit == 0 {
		return 0
	}
	return int(min(max(limit/connsPerIPShare, 1), 65536))
}

// defaultConnsPerIP reads the open-file limit, for the start-up line, and sets
// --max-conns-per-ip from it when neither the flag nor its twin set it.
func defaultConnsPerIP(c *config, set bool) {
	c.OpenFileLimit = openFileLimit()
	if !set {
		c.MaxConnsPerIP = connsPerIPFor(c.OpenFileLimit)
	}
}
