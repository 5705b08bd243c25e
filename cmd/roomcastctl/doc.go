// Command roomcastctl is roomcast's command line for people and scripts: it follows a
// room (tail), publishes (publish), reads a pod's state (stats, rooms), moves streams
// off a pod (drain, shed), shows or closes a WebSocket client's connection
// (client), issues tickets (ticket) and plans capacity (plan).
//
// It talks to a gateway over HTTP only: the public listener (--url) for rooms and
// tickets, the admin listener (--admin-url) for the rest. Output is made for people
// by default and is one JSON value per line with --json.
//
// Exit codes: 0 the operation succeeded; 1 it failed (the server answered an error,
// tail saw a resync); 2 usage error (bad flags, a bad room name, an unreadable
// credential file); 3 the server could not be reached.
//
// Credentials: the publish or bearer credential comes from --token, --token-file or
// ROOMCASTCTL_TOKEN, the admin token from --admin-token, --admin-token-file or
// ROOMCASTCTL_ADMIN_TOKEN, in that order. They are sent as Authorization: Bearer and
// never printed.
//
// tail is built on github.com/r3labs/sse/v2's client, which stops on a clean end of
// stream, never resets its backoff and gives up after 15 minutes; follow (stream.go)
// wraps one Client per tail so that it reconnects on a clean end as on an error,
// resumes from the last id it saw (Last-Event-ID), waits the server's retry: hint,
// backs off while connections fail and starts over after one that worked. The r3labs
// client drops comment lines, so follow's transport reads them off the response body
// as it passes (commentTap): tail prints what the server says, such as why it ended a
// stream. ws speaks the WebSocket protocol through gateway/gatewaytest/wsclient, the
// client the gateway's tests use, which links none of the server; its output names
// the room of every event, and its default client id holds the process id, so that
// two ws side by side do not take the connection from each other.
//
// Files by role: main.go (dispatch, exit codes, help), flags.go (global flags,
// credentials), secret.go (credential values and files), api.go (requests and error
// answers), stream.go (the resuming SSE client), tail.go, publish.go, admin.go
// (stats, rooms, drain, shed), client.go, ticket.go, ws.go and plan.go.
package main
