package rooms

// Reason says why a stream ended. The same value names the metric label and the log
// field.
type Reason int32

const (
	// ReasonClientGone: the client went away.
	ReasonClientGone Reason = iota + 1
	// ReasonSlowConsumer: the member's queue overflowed; it resumes by id.
	ReasonSlowConsumer
	// ReasonWriteFailed: a write failed or missed its deadline.
	ReasonWriteFailed
	// ReasonShed: an operator or the drain asked the stream to reconnect elsewhere.
	ReasonShed
	// ReasonShutdown: the registry closed.
	ReasonShutdown
	// ReasonUnavailable: the room could not be joined (bus or log unavailable).
	ReasonUnavailable
	// ReasonReauth: the stream's credential expired or was revoked; it reconnects
	// with a fresh one.
	ReasonReauth

	// NumReasons bounds the values above, for arrays indexed by Reason.
	NumReasons
)

// Reasons lists every reason, for metric registration.
var Reasons = []Reason{ReasonClientGone, ReasonSlowConsumer, ReasonWriteFailed, ReasonShed, ReasonShutdown, ReasonUnavailable, ReasonReauth}

func (r Reason) String() string {
	switch r {
	case ReasonClientGone:
		return "client_gone"
	case ReasonSlowConsumer:
		return "slow_consumer"
	case ReasonWriteFailed:
		return "write_failed"
	case ReasonShed:
		return "shed"
	case ReasonShutdown:
		return "shutdown"
	case ReasonUnavailable:
		return "unavailable"
	case ReasonReauth:
		return "reauth"
	}
	return "open"
}
