// Package wsclient is the repository's one client of the gateway's WebSocket
// protocol (GET /ws; gateway/README.md, "WebSocket for agents"): Dial upgrades, a Conn writes
// the client's frames (hello, ack, publish, ping) and reads the server's (welcome,
// event, resync, published, pong, error) as Frames or as raw messages, and CloseOf
// and Retryable say what the end of a connection means. The gateway's tests, the
// load generator and roomcastctl all speak the protocol through it.
//
// # Must not
//
// Import anything but replay/wire, github.com/coder/websocket and the standard
// library (testing included): roomcastctl and the load generator link it, and must
// not link the gateway, a Redis client or a JWT library. Test conveniences that fail
// a test belong to the tests that use them.
//
// # Concurrency
//
// A Conn is read by one goroutine at a time and written by one goroutine at a time;
// a read and a write may run concurrently, as on a websocket.Conn.
package wsclient
