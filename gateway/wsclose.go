package gateway

import (
	"net/http"

	"github.com/coder/websocket"
)

// How an operator closes a client's connection (POST /admin/clients/{id}/close?mode=):
// one decision for both paths, and for the pod that holds the connection when
// another pod was asked.

// closeMode is how an operator's close ends a connection.
type closeMode uint8

const (
	// closeKick closes with 4409, which the project's clients take as final (the
	// default, as before modes existed).
	closeKick closeMode = iota + 1
	// closeReconnect closes with 1012 (service restart): the client comes back and
	// resumes from its last ids.
	closeReconnect
)

var errBadCloseMode = newError(http.StatusBadRequest, "invalid_mode", "mode is reconnect (close 1012: the client comes back) or kick (close 4409: it stays away; the default)")

// parseCloseMode reads ?mode=: empty is kick.
func parseCloseMode(v string) (closeMode, *apiError) {
	switch v {
	case "", "kick":
		return closeKick, nil
	case "reconnect":
		return closeReconnect, nil
	}
	return 0, errBadCloseMode
}

func (m closeMode) String() string {
	if m == closeReconnect {
		return "reconnect"
	}
	return "kick"
}

// code is the close code and reason of an operator's close in mode m.
func (m closeMode) code() (websocket.StatusCode, string) {
	if m == closeReconnect {
		return wsServiceRestart, "closed by an operator: reconnect and resume"
	}
	return wsSuperseded, "closed by an operator"
}
