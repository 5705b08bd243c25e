// Package wire is roomcast's wire vocabulary: the event envelope and its ids
// (Event, Position, ParsePosition), the resume tokens of multiplexed streams
// (FormatToken, ParseToken), room names and event types (ValidRoom, ValidType,
// Reserved), WebSocket client ids and boots (ValidClient, ParseBoot, NewBoot), and
// the SSE framing of an event (AppendFrame, EventFrame, AnchorType).
//
// It imports only the standard library, so that a client or a tool (roomcastctl,
// the load generator, the capacity planner) speaks the protocol without linking the
// gateway, a Redis client or a JWT library. Package replay names the same things for
// the code that keeps history.
package wire
