package gateway

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/roomcast/roomcast/replay"
)

// routeMethods are the methods a 405's Allow header may list, in the order listed.
var routeMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// methodNotAllowed answers 405 with Allow naming the methods the route has (chi
// hands a custom handler no list, so it is looked up here); HEAD goes wherever GET
// does. A path no route has (an unknown method on a page, say) goes to notFound.
func methodNotAllowed(notFound http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rctx := chi.RouteContext(r.Context())
		path := routePath(r)
		var allow []string
		if rctx != nil && rctx.Routes != nil {
			for _, m := range routeMethods {
				if rctx.Routes.Match(chi.NewRouteContext(), m, path) ||
					m == http.MethodHead && rctx.Routes.Match(chi.NewRouteContext(), http.MethodGet, path) {
					allow = append(allow, m)
				}
			}
		}
		if len(allow) == 0 {
			notFound.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, errMethodNotAllowed)
	}
}

// streamHead answers a HEAD of a stream: the checks of a GET, with the status a GET
// would get, then the stream's headers and no body, without joining the room. A
// ticket is checked but not redeemed (see headSubscriber).
func (s *Server) streamHead(w http.ResponseWriter, r *http.Request) {
	room := chi.URLParam(r, "room")
	if !replay.ValidRoom(room) {
		writeError(w, errBadRoom)
		return
	}
	if _, _, aerr := resumePoint(r); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.headSubscriber(r, room); aerr != nil {
		writeError(w, aerr)
		return
	}
	s.openStream(w)
	w.WriteHeader(http.StatusOK)
}
