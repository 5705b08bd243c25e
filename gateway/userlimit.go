package gateway

import (
	"sync"

	"github.com/roomcast/roomcast/gateway/auth"
)

// The per-user cap (Config.MaxStreamsPerUser): how many streams, multiplexed
// streams and WebSocket connections one authenticated user (the credential's sub)
// may hold open on this pod, each counted once whatever its rooms. It is an
// admission refusal like the others: a stream over it gets a longer retry: and its
// end, a WebSocket upgrade 503 unavailable, both counted in
// roomcast_streams_rejected_total{reason="user"}. Connections without a sub
// (anonymous ones, static publish keys) are not counted. The count is the pod's:
// a user may hold the cap on every pod of the fleet (a fleet-wide count would
// cost a call to Redis per connection).

// rejectUser: the user already holds as many connections on the pod as it may.
const rejectUser = "user"

// userCap counts open connections per sub.
type userCap struct {
	max int // 0: no cap

	mu    sync.Mutex
	bySub map[string]int
}

func newUserCap(maxPerUser int) *userCap {
	return &userCap{max: maxPerUser, bySub: map[string]int{}}
}

// hold takes one of who's places; release gives it back. ok is false when who
// holds the cap already. A principal without a sub, or a pod without a cap, holds
// nothing.
func (u *userCap) hold(who auth.Principal) (release func(), ok bool) {
	if u.max <= 0 || who.Sub == "" {
		return func() {}, true
	}
	sub := who.Sub
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.bySub[sub] >= u.max {
		return nil, false
	}
	u.bySub[sub]++
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			if u.bySub[sub]--; u.bySub[sub] <= 0 {
				delete(u.bySub, sub)
			}
			u.mu.Unlock()
		})
	}, true
}

// admitUser adds who's place to an admitted connection's release: the release to
// use instead, or the reason it is turned away (release has run then). Streams and
// WebSocket connections call it after the pod's admission.
func (s *Server) admitUser(who auth.Principal, release func()) (func(), string) {
	releaseUser, ok := s.users.hold(who)
	if !ok {
		release()
		return nil, rejectUser
	}
	return func() { releaseUser(); release() }, ""
}
