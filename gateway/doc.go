// Package gateway is roomcast's HTTP edge: the chi routes of the public and admin
// listeners, SSE framing and writing, the publish and admin handlers, access
// control, stream admission and metrics registration.
//
// # Connections
//
// Every transport is a connection of the one delivery core (conn.go): a single-room
// stream (GET /rooms/{room}/events), a multiplexed stream (GET /events?room=a&room=b)
// and a WebSocket connection (GET /ws) are each a conn over their rooms, with a
// transport that supplies only how things look on its wire: the framing of events and
// resyncs, the opening (anchor, welcome), the writes, the heartbeat and the last words
// (retry hint, reauth, close code). The core owns the rest, once: joining, the pod's
// registry of connections (Connections: what the drain paces and sheds, what the
// stats count, one entry per connection however many rooms), the revocation and
// expiry watch, the history-to-live handoff, replay batching, the no-hole,
// no-duplicate, resync and fork rules (stepItem), the round-robin across rooms
// (roundRobin), write batches and end reasons.
//
// The request goroutine is the connection's only writer. It joins the rooms (which
// subscribes the pod to each room's doorbell), reads the history after each resume
// point, then serves its members' queues, skipping every seq it already sent. A
// connection of one room waits on its member's queue; one of several rooms has its
// members ring one bell (rooms.JoinBell), and each write batch takes at most a
// per-room budget from each queue in turn. Events come from the rooms as items, each
// transport's encoding made once per event and shared (rooms.Item.Encoded): SSE
// fields after the stream's own id line (the event's position, or a multiplexed
// stream's resume token, replay.ParseToken), a WebSocket event frame. Every write
// has a deadline. There is no other goroutine per stream.
//
// # WebSocket
//
// GET /ws is the agents' transport on the same rooms: after a hello naming its
// client, boot and rooms (with resume ids), a connection is a conn like a
// multiplexed stream's, and also publishes. Two goroutines per connection: the
// request goroutine is the only writer (queues, answers, pings, the owner's refresh);
// a reader goroutine reads frames and serves acks, publishes and pings one at a time,
// handing answers to the writer through a bounded channel. With the idle loop
// (Config.IdleLoop) neither goroutine stays: the request goroutine upgrades (gobwas/ws),
// reads the hello and replays, then a loop worker parses the client's frames as the
// socket gives them, answers acks and pings itself and hands publishes to a goroutine
// that serves them in order while any wait (wsloop.go). A connection's room state
// (delivered, acked) is guarded by its mu; the pod's connections by client id by
// Server.wsMu, never held with it. One connection owns each client id (Config.Owners,
// else the log's registry), bound to the identity of its credential while the claim
// lives (wsidentity.go); the claims of one id take turns on a pod (claimTurn). A claim
// of the same identity displaces the older connection, which is closed with 4409 on
// its pod when the registry names its session; one of another identity is refused
// with 4403.
//
// # Rebalancing
//
// Server.Rebalance, which the caller runs on a goroutine of its own until its
// context ends, records the pod's open connections for the fleet every
// Config.Rebalance.Interval (Config.Streams, else the log's) and, with
// Config.Rebalance.On, sheds connections while the pod holds more than its share
// (rebalance.go): paced, never while draining, those away from their rooms' home
// first, through the same close as POST /admin/shed. It holds no lock across a
// store call; Connections' mu is held only to sample the open connections.
//
// # Edge
//
// Before anything else, every listener answers 421 to a request whose Host names
// neither localhost, an IP address nor one of Config.PublicHosts (DNS rebinding
// would otherwise lend a foreign page the loopback trust). Then, before routing,
// both listeners refuse state-changing requests a browser marks as
// cross-origin unless they carry a bearer credential, bound how long a request body
// may take (streams have none), and close the connection after an answer sent before
// the body was read. LimitListener caps the connections one peer address holds that
// are not streams. Every GET route answers HEAD, and a 405 names the route's methods.
// On the public listener, the origins of Config.AllowOrigins get CORS answers on the
// routes pages call (the room routes, POST /events, POST /tickets) and pass the
// cross-origin check; on the admin listener, Config.AdminToken guards /admin/* and
// /debug/* (never /metrics or the operator page's files).
//
// # Access control
//
// Config.Auth (package auth) says who a request is and what it may do: a stream's
// credential is a bearer JWT, a session cookie or a single-use ticket from POST
// /tickets; a publisher's, a static key or a JWT with publish grants. Without any JWT
// key every room is readable and only loopback clients (or static keys) publish. A
// stream is indexed by its user and token while it is open: at its credential's
// expiry, or when POST /admin/revoke reaches any pod, it ends with event: reauth (no
// id, so the client resumes where it was) and a final retry:. Anonymous streams may
// make a pod hold at most Config.MaxAnonymousRooms rooms, and those from one client
// address at most Config.MaxAnonymousRoomsPerIP.
//
// # Must not
//
// Talk to Redis or hold room state: it calls replay.Log to publish and read history,
// and rooms.Registry for live fan-out.
//
// # The API's description
//
// openapi.yaml, embedded and served on the public listener at GET /openapi.yaml
// (OpenAPI), is the OpenAPI 3.1 description of both listeners: every route, the
// statuses each answers, the error body and its codes. The package's tests keep it
// honest: TestOpenAPIRoutes walks both routers against it, and every exchange with a
// test pod is checked against it (apiCheck in the tests). A route, a status or an
// error code added here is added there in the same change.
//
// # Errors
//
// Every error answer is a status code with a JSON body {"error","message"}. A
// subscribe is answered with a non-200 status only when it can never succeed as sent
// (a bad room name, a malformed resume point, a missing or bad credential: 401, a room
// the credential does not grant: 403); an overloaded or draining pod answers 200, a
// longer jittered retry: and an ended stream, because EventSource gives up for good
// on anything else.
//
// Trouble with the event log is said plainly, naming the backend and its address as
// the log describes itself (its Describe method, never a credential): a stream the
// log fails ends with a comment line (": the event log (redis at 127.0.0.1:6379) is
// unreachable; retry in a few seconds") before its retry hint, a WebSocket connection
// with a close reason that says the same, and a publish it fails with a 503 whose
// message names the backend and a short cause (logCause).
package gateway
