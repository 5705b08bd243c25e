package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
)

// expectReauth reads s up to its end and checks that it ended with a reauth for
// room (no id, so the resume point stays) followed by a retry hint. It returns the
// reauth's exp.
func expectReauth(t *testing.T, s *stream, room string) int64 {
	t.Helper()
	for {
		f, ok := s.nextAny()
		if !ok {
			t.Fatal("stream ended without a reauth")
		}
		if f.event != "reauth" {
			continue // an event, heartbeat or anchor from before the credential ended
		}
		if f.hasID {
			t.Fatalf("reauth with an id %q: it would move the resume point", f.id)
		}
		var d struct {
			Room string `json:"room"`
			Exp  int64  `json:"exp"`
		}
		if err := json.Unmarshal([]byte(f.data), &d); err != nil || d.Room != room || d.Exp == 0 {
			t.Fatalf("reauth data %q, want {\"room\":%q,\"exp\":…}", f.data, room)
		}
		rest := s.waitEnd()
		if len(rest) != 1 || rest[0].retry == 0 || rest[0].data != "" {
			t.Fatalf("after the reauth %+v, want a retry hint and the end", rest)
		}
		return d.Exp
	}
}

// TestStreamEndsWithReauthAtExpiry: a stream never outlives its credential. At the
// token's exp it gets a reauth carrying that exp, a final retry hint and the end,
// and the client resumes with a fresh token losing nothing.
func TestStreamEndsWithReauthAtExpiry(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	const room = "team-7.a"
	short := p.token(t, "EdDSA", "ana", 2*time.Second, []string{"team-7.*"}, nil)
	exp := int64(gatewaytest.ClaimsOf(t, short)["exp"].(float64))
	s := p.subscribe(t, room, "", "Authorization", "Bearer "+short)
	if s.res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", s.res.StatusCode)
	}
	first := postAs(t, p, room, `1`)
	if f := s.next(); f.id != first {
		t.Fatalf("got %+v, want %s", f, first)
	}
	got := expectReauth(t, s, room)
	if now := time.Now().Unix(); got != exp || now < exp {
		t.Fatalf("reauth exp %d at %d, want the token's exp %d, not before it", got, now, exp)
	}
	missed := postAs(t, p, room, `2`)
	fresh := p.token(t, "EdDSA", "ana", time.Hour, []string{"team-7.*"}, nil)
	again := p.subscribe(t, room, "", "Authorization", "Bearer "+fresh, "Last-Event-ID", first)
	expectIDs(t, again, missed)
}

// TestRevokeEndsStreamsAndRefusesTokens: revoking a user ends their streams with a
// reauth and refuses their tokens issued before it; revoking a token (jti) ends
// only that token's streams.
func TestRevokeEndsStreamsAndRefusesTokens(t *testing.T) {
	p := newMemSecurePod(t, gatewaytest.NewKeys(t), gateway.Config{})
	const room = "team-7.a"
	grant := []string{"team-7.*"}
	withJTI := func(sub, jti string) string {
		c := gatewaytest.UserClaims(sub, time.Hour, grant, nil)
		c["aud"], c["iss"], c["jti"] = testAudience, testIssuer, jti
		c["iat"] = time.Now().Add(-10 * time.Second).Unix()
		return p.keys.Sign(t, "RS256", c)
	}
	t1, t2, bob := withJTI("ana", "t-1"), withJTI("ana", "t-2"), withJTI("bob", "t-3")
	s1 := p.subscribe(t, room, "", "Authorization", "Bearer "+t1)
	s2 := p.subscribe(t, room, "", "Authorization", "Bearer "+t2)
	sb := p.subscribe(t, room, "", "Authorization", "Bearer "+bob)
	for _, s := range []*stream{s1, s2, sb} {
		expectAnchor(t, s)
	}
	if a := accessStats(t, p.pod); a.Mode != "jwt" || a.Users != 2 || len(a.TopUsers) != 2 ||
		a.TopUsers[0].Sub != "ana" || a.TopUsers[0].Streams != 2 || a.TopUsers[1].Sub != "bob" {
		t.Fatalf("/admin/stats access %+v, want mode jwt and users ana (2 streams), bob (1)", a)
	}

	revoke(t, p.pod, `{"jti":"t-1"}`)
	expectReauth(t, s1, room)
	if got := openStatus(t, p.public.URL, room, "", "Authorization", "Bearer "+t1); got != 401 {
		t.Fatalf("revoked token: %d, want 401", got)
	}
	marker := postAs(t, p, room, `"after jti"`)
	for _, s := range []*stream{s2, sb} {
		if f := s.next(); f.id != marker {
			t.Fatalf("a stream of another token got %+v, want %s", f, marker)
		}
	}

	revoke(t, p.pod, `{"sub":"ana"}`)
	expectReauth(t, s2, room)
	if got := openStatus(t, p.public.URL, room, "", "Authorization", "Bearer "+t2); got != 401 {
		t.Fatalf("token of a revoked user: %d, want 401", got)
	}
	// A ticket minted from the revoked token is refused too.
	if res := do(t, http.MethodPost, p.public.URL+"/tickets", "", "Authorization", "Bearer "+t2); res.status != 401 {
		t.Fatalf("ticket for a revoked user: %d, want 401", res.status)
	}
	if a := accessStats(t, p.pod); a.Refused["subscribe_revoked"] != 2 || a.TicketsIssued != 0 {
		t.Fatalf("/admin/stats access %+v, want 2 streams refused as revoked and no ticket issued", a)
	}
	marker = postAs(t, p, room, `"after sub"`)
	if f := sb.next(); f.id != marker {
		t.Fatalf("another user's stream got %+v, want %s", f, marker)
	}
	// A token issued after the revocation is the user's way back in.
	c := gatewaytest.UserClaims("ana", time.Hour, grant, nil)
	c["aud"], c["iss"], c["iat"] = testAudience, testIssuer, time.Now().Add(2*time.Second).Unix()
	if got := openStatus(t, p.public.URL, room, "", "Authorization", "Bearer "+p.keys.Sign(t, "RS256", c)); got != 200 {
		t.Fatalf("token issued after the revocation: %d, want 200", got)
	}
}

// TestFleetTicketsAndRevocations: a ticket issued on one pod is redeemed on another,
// once; a revocation on one pod ends the user's streams on the other.
func TestFleetTicketsAndRevocations(t *testing.T) {
	for _, kind := range []string{"standalone", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			var c addrser
			if kind == "cluster" {
				c = redistest.SharedCluster(t)
			} else {
				c = redistest.SharedStandalone(t)
			}
			keys := gatewaytest.NewKeys(t)
			a := newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{})
			b := newSecurePod(t, newRedisLog(t, c), keys, gateway.Config{})
			user := redistest.Prefix(t)
			room := "team-7." + user
			tok := a.token(t, "ES256", user, time.Hour, []string{"team-7.*"}, nil)

			tk := a.ticket(t, tok)
			if got := openStatus(t, b.public.URL, room, "ticket="+tk); got != 200 {
				t.Fatalf("ticket from pod A on pod B: %d, want 200", got)
			}
			if got := openStatus(t, a.public.URL, room, "ticket="+tk); got != 401 {
				t.Fatalf("the same ticket again on pod A: %d, want 401", got)
			}
			if got := openStatus(t, b.public.URL, room, "ticket="+tk); got != 401 {
				t.Fatalf("the same ticket again on pod B: %d, want 401", got)
			}

			onB := b.subscribe(t, room, "ticket="+a.ticket(t, tok))
			expectAnchor(t, onB)
			revoke(t, a.pod, `{"sub":"`+user+`"}`)
			expectReauth(t, onB, room)
			if got := openStatus(t, b.public.URL, room, "", "Authorization", "Bearer "+tok); got != 401 {
				t.Fatalf("revoked on A, token on B: %d, want 401", got)
			}
		})
	}
}

// TestFleetRevocationOutlivesRedisData: Redis restarts without its data, so
// room:revoked is gone; the pod that revoked writes the revocation back, and a pod
// started after the loss refuses the token once it has been.
func TestFleetRevocationOutlivesRedisData(t *testing.T) {
	port := redistest.FreePort(t)
	srv := redistest.StandaloneAt(t, port)
	keys := gatewaytest.NewKeys(t)
	a := newSecurePod(t, newRedisLog(t, srv), keys, gateway.Config{})
	user := redistest.Prefix(t)
	room := "team-7." + user
	tok := a.token(t, "ES256", user, time.Hour, []string{"team-7.*"}, nil)
	revoke(t, a.pod, `{"sub":"`+user+`"}`)

	// A new server on the same address, in a new directory: nothing of the old data.
	_, _ = srv.Do("SHUTDOWN", "NOSAVE")
	srv = redistest.StandaloneAt(t, port)

	b := newSecurePod(t, newRedisLog(t, srv), keys, gateway.Config{})
	learned := make(chan struct{}, 1)
	b.auth.OnRevoke(func(r replay.Revocation) {
		if r.Kind == "sub" && r.Value == user {
			select {
			case learned <- struct{}{}:
			default:
			}
		}
	})
	if got := openStatus(t, b.public.URL, room, "", "Authorization", "Bearer "+tok); got != 401 {
		select {
		case <-learned:
		case <-time.After(30 * time.Second):
			t.Fatalf("a pod started after Redis lost its data admits the revoked token (%d) and never learns the revocation", got)
		}
	}
	if got := openStatus(t, b.public.URL, room, "", "Authorization", "Bearer "+tok); got != 401 {
		t.Fatalf("revoked on A before Redis lost its data, token on B: %d, want 401", got)
	}
}

func newRedisLog(t testing.TB, c addrser) replay.Log {
	t.Helper()
	l, err := replay.NewRedisLog(t.Context(), replay.RedisConfig{Addrs: c.Addrs(), History: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// revoke posts body to the pod's POST /admin/revoke.
func revoke(t testing.TB, p *pod, body string) {
	t.Helper()
	if res := do(t, http.MethodPost, p.admin.URL+"/admin/revoke", body, "Content-Type", "application/json"); res.status != 200 {
		t.Fatalf("POST /admin/revoke %s: %d %s", body, res.status, res.body)
	}
}

// postAs publishes with the pod's static key and returns the event's id.
func postAs(t testing.TB, p *securePod, room, body string) string {
	t.Helper()
	res := do(t, http.MethodPost, p.public.URL+"/rooms/"+room+"/events", body,
		"Content-Type", "application/json", "Authorization", "Bearer "+testStaticKey)
	if res.status != http.StatusCreated {
		t.Fatalf("publish: %d %s", res.status, res.body)
	}
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(res.body), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

type accessBody struct {
	Mode     string
	Users    int
	TopUsers []struct {
		Sub     string
		Streams int
	} `json:"top_users"`
	Refused       map[string]int
	TicketsIssued int `json:"tickets_issued"`
}

// accessStats reads the "access" part of the pod's /admin/stats.
func accessStats(t testing.TB, p *pod) accessBody {
	t.Helper()
	res := do(t, http.MethodGet, p.admin.URL+"/admin/stats", "")
	var st struct{ Access accessBody }
	if err := json.Unmarshal([]byte(res.body), &st); err != nil || res.status != 200 {
		t.Fatalf("/admin/stats: %d %v", res.status, err)
	}
	return st.Access
}
