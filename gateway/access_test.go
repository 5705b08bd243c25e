package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/replaytest"
)

const (
	testAudience  = "roomcast-test"
	testIssuer    = "https://issuer.test"
	testCookie    = "rc_session"
	testStaticKey = "static-publish-key-0123456789"
)

func init() { gatewaytest.Secret("the static publish key", testStaticKey) }

// securePod is a pod with access control on: RS256, ES256, EdDSA and HS256 keys,
// an audience and an issuer, a session cookie, one static publish key, and
// public.* readable without a credential.
type securePod struct {
	*pod
	keys *gatewaytest.Keys
	auth *auth.Authenticator
}

func newSecurePod(t testing.TB, log replay.Log, keys *gatewaytest.Keys, gw gateway.Config) *securePod {
	t.Helper()
	anon, err := auth.ParseGrants([]string{"public.*"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{
		KeyFiles:    []string{keys.RSAFile, keys.ECFile, keys.Ed25519File},
		HMACFile:    keys.HMACFile,
		Audience:    testAudience,
		Issuer:      testIssuer,
		Cookie:      testCookie,
		PublishKeys: []string{testStaticKey},
		Anonymous:   anon,
		Tickets:     control(t, log).Tickets,
		Revocations: control(t, log).Revocations,
	})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(a.Close)
	gw.Auth = a
	return &securePod{pod: newPodOn(t, log, podConfig{gw: gw}), keys: keys, auth: a}
}

func newMemSecurePod(t testing.TB, keys *gatewaytest.Keys, gw gateway.Config) *securePod {
	t.Helper()
	mem, err := replay.NewMemoryLog(replay.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return newSecurePod(t, mem, keys, gw)
}

// token signs a token for the test audience and issuer.
func (p *securePod) token(t testing.TB, alg, sub string, ttl time.Duration, subscribe, publish []string) string {
	t.Helper()
	c := gatewaytest.UserClaims(sub, ttl, subscribe, publish)
	c["aud"], c["iss"] = testAudience, testIssuer
	return p.keys.Sign(t, alg, c)
}

// ticket asks POST /tickets for a ticket with the bearer token and returns it.
func (p *securePod) ticket(t testing.TB, bearer string) string {
	t.Helper()
	res := do(t, http.MethodPost, p.public.URL+"/tickets", "", "Authorization", "Bearer "+bearer)
	if res.status != http.StatusCreated {
		t.Fatalf("POST /tickets: %d %s", res.status, res.body)
	}
	var out struct {
		Ticket    string    `json:"ticket"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal([]byte(res.body), &out); err != nil || out.Ticket == "" || out.ExpiresAt.IsZero() {
		t.Fatalf("POST /tickets answered %d (%v)", res.status, err)
	}
	return gatewaytest.Secret("a ticket", out.Ticket)
}

// openStatus opens room's stream and returns its status, after checking that a
// refusal is a JSON error (with WWW-Authenticate for 401) and an admission carries
// the stream's content type. The stream is closed.
func openStatus(t testing.TB, base, room, query string, headers ...string) int {
	t.Helper()
	u := base + "/rooms/" + room + "/events"
	if query != "" {
		u += "?" + query
	}
	res := doStream(t, u, headers...)
	return res.status
}

// doStream sends a GET for a stream and reads its answer: for 200, only the status
// and headers (the stream is then closed); otherwise the whole JSON error.
func doStream(t testing.TB, u string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("200 with Content-Type %q", ct)
		}
		return response{status: res.StatusCode, header: res.Header}
	}
	var body struct{ Error, Message string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Error == "" || body.Message == "" {
		t.Fatalf("%d without a JSON error (%v)", res.StatusCode, err)
	}
	if res.StatusCode == http.StatusUnauthorized && res.Header.Get("WWW-Authenticate") == "" {
		t.Fatal("401 without WWW-Authenticate")
	}
	return response{status: res.StatusCode, header: res.Header, body: body.Error}
}

// TestAccessControl is the table of allowed and denied requests: every route, every
// credential source, the usual forgeries.
func TestAccessControl(t *testing.T) {
	keys := gatewaytest.NewKeys(t)
	other := gatewaytest.NewKeys(t) // keys the pod does not know
	p := newMemSecurePod(t, keys, gateway.Config{})
	team := []string{"team-7.*"}
	rs := p.token(t, "RS256", "ana", time.Hour, team, nil)
	cookie := func(tok string) string { return testCookie + "=" + tok }
	claims := func(mut func(gatewaytest.Claims)) gatewaytest.Claims {
		c := gatewaytest.UserClaims("ana", time.Hour, team, nil)
		c["aud"], c["iss"] = testAudience, testIssuer
		mut(c)
		return c
	}
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	streams := []struct {
		name    string
		room    string
		query   func() string
		headers []string
		want    int
	}{
		{name: "no credential, private room", room: "team-7.a", want: 401},
		{name: "no credential, anonymous room", room: "public.news", want: 200},
		{name: "RS256 bearer, room by pattern", room: "team-7.a", headers: bearer(rs), want: 200},
		{name: "RS256 bearer, room outside the pattern", room: "team-70", headers: bearer(rs), want: 403},
		{name: "RS256 bearer, the pattern's own prefix", room: "team-7", headers: bearer(rs), want: 403},
		{name: "PS256 bearer", room: "team-7.a", headers: bearer(p.token(t, "PS256", "ana", time.Hour, team, nil)), want: 200},
		{name: "ES256 bearer", room: "team-7.a", headers: bearer(p.token(t, "ES256", "ana", time.Hour, team, nil)), want: 200},
		{name: "EdDSA bearer, exact grant", room: "u.ana", headers: bearer(p.token(t, "EdDSA", "ana", time.Hour, []string{"u.ana"}, nil)), want: 200},
		{name: "EdDSA bearer, exact grant, other room", room: "u.bob", headers: bearer(p.token(t, "EdDSA", "ana", time.Hour, []string{"u.ana"}, nil)), want: 403},
		{name: "HS256 bearer", room: "team-7.a", headers: bearer(p.token(t, "HS256", "ana", time.Hour, team, nil)), want: 200},
		{name: "grant *", room: "anything", headers: bearer(p.token(t, "RS256", "ops", time.Hour, []string{"*"}, nil)), want: 200},
		{name: "no grants", room: "team-7.a", headers: bearer(p.token(t, "RS256", "ana", time.Hour, nil, nil)), want: 403},
		{name: "publish grant only", room: "team-7.a", headers: bearer(p.token(t, "RS256", "ana", time.Hour, nil, team)), want: 403},
		{name: "wrong key", room: "team-7.a", headers: bearer(other.Sign(t, "RS256", claims(func(gatewaytest.Claims) {}))), want: 401},
		{name: "wrong HMAC secret", room: "team-7.a", headers: bearer(other.Sign(t, "HS256", claims(func(gatewaytest.Claims) {}))), want: 401},
		{name: "alg none", room: "team-7.a", headers: bearer(keys.Sign(t, "none", claims(func(gatewaytest.Claims) {}))), want: 401},
		{name: "expired", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))), want: 401},
		{name: "not yet valid", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }))), want: 401},
		{name: "wrong audience", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["aud"] = "elsewhere" }))), want: 401},
		{name: "no audience", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { delete(c, "aud") }))), want: 401},
		{name: "wrong issuer", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["iss"] = "https://evil.test" }))), want: 401},
		{name: "malformed grants", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["roomcast"] = "everything" }))), want: 401},
		{name: "garbage bearer", room: "team-7.a", headers: bearer("not.a.jwt"), want: 401},
		{name: "a static publish key is no subscriber credential", room: "team-7.a", headers: bearer(testStaticKey), want: 401},
		{name: "cookie", room: "team-7.a", headers: []string{"Cookie", cookie(rs)}, want: 200},
		{name: "cookie, room not granted", room: "team-8.a", headers: []string{"Cookie", cookie(rs)}, want: 403},
		{name: "bad cookie", room: "team-7.a", headers: []string{"Cookie", cookie("x.y.z")}, want: 401},
		{name: "other cookies only", room: "team-7.a", headers: []string{"Cookie", "theme=dark"}, want: 401},
		{name: "bad bearer never falls back to a good cookie", room: "team-7.a", headers: append(bearer("x.y.z"), "Cookie", cookie(rs)), want: 401},
		{name: "bearer wins over cookie", room: "team-7.a", headers: append(bearer(rs), "Cookie", cookie("x.y.z")), want: 200},
		{name: "ticket", room: "team-7.a", query: func() string { return "ticket=" + p.ticket(t, rs) }, want: 200},
		{name: "ticket, room not granted", room: "team-8.a", query: func() string { return "ticket=" + p.ticket(t, rs) }, want: 403},
		{name: "ticket of the wrong shape", room: "team-7.a", query: func() string { return "ticket=abc" }, want: 401},
		{name: "unknown ticket", room: "team-7.a", query: func() string { return "ticket=" + strings.Repeat("A", 43) }, want: 401},
		{name: "bad room before anything", room: "no{pe}", headers: bearer(rs), want: 400},
	}
	for _, tc := range streams {
		t.Run("GET stream/"+tc.name, func(t *testing.T) {
			q := ""
			if tc.query != nil {
				q = tc.query()
			}
			if got := openStatus(t, p.public.URL, url.PathEscape(tc.room), q, tc.headers...); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}

	t.Run("GET stream/ticket replayed", func(t *testing.T) {
		tk := p.ticket(t, rs)
		if got := openStatus(t, p.public.URL, "team-7.a", "ticket="+tk); got != 200 {
			t.Fatalf("first redemption: %d", got)
		}
		if got := openStatus(t, p.public.URL, "team-7.a", "ticket="+tk); got != 401 {
			t.Fatalf("second redemption: %d, want 401", got)
		}
	})
	t.Run("HEAD stream does not redeem a ticket", func(t *testing.T) {
		tk := p.ticket(t, rs)
		if res := do(t, http.MethodHead, p.public.URL+"/rooms/team-7.a/events?ticket="+tk, ""); res.status != 200 {
			t.Fatalf("HEAD: %d", res.status)
		}
		if got := openStatus(t, p.public.URL, "team-7.a", "ticket="+tk); got != 200 {
			t.Fatalf("GET after HEAD: %d", got)
		}
		if res := do(t, http.MethodHead, p.public.URL+"/rooms/team-7.a/events", ""); res.status != 401 {
			t.Fatalf("HEAD without a credential: %d, want 401", res.status)
		}
	})

	pubRS := p.token(t, "RS256", "svc", time.Hour, nil, team)
	publishes := []struct {
		name    string
		room    string
		headers []string
		want    int
	}{
		{name: "no credential, even from loopback", room: "team-7.a", want: 401},
		{name: "static key", room: "anything", headers: bearer(testStaticKey), want: 201},
		{name: "wrong static key", room: "anything", headers: bearer(testStaticKey + "x"), want: 401},
		{name: "JWT publish grant", room: "team-7.a", headers: bearer(pubRS), want: 201},
		{name: "JWT publish grant, other room", room: "team-8.a", headers: bearer(pubRS), want: 403},
		{name: "JWT subscribe grant only", room: "team-7.a", headers: bearer(rs), want: 403},
		{name: "expired JWT", room: "team-7.a", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) {
			c["exp"] = time.Now().Add(-time.Hour).Unix()
			c["roomcast"] = gatewaytest.Grants(nil, team)
		}))), want: 401},
		{name: "alg none", room: "team-7.a", headers: bearer(keys.Sign(t, "none", claims(func(c gatewaytest.Claims) { c["roomcast"] = gatewaytest.Grants(nil, team) }))), want: 401},
		{name: "a cookie is no publish credential", room: "team-7.a", headers: []string{"Cookie", cookie(pubRS)}, want: 401},
	}
	for _, tc := range publishes {
		t.Run("POST publish/"+tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, p.public.URL+"/rooms/"+tc.room+"/events", `{"n":1}`, append([]string{"Content-Type", "application/json"}, tc.headers...)...)
			if res.status != tc.want {
				t.Fatalf("status %d (%s), want %d", res.status, res.body, tc.want)
			}
		})
	}

	t.Run("POST batch/items checked one by one", func(t *testing.T) {
		res := do(t, http.MethodPost, p.public.URL+"/events",
			`[{"room":"team-7.a","body":1},{"room":"team-8.a","body":2},{"room":"team-7.b","body":3}]`,
			"Content-Type", "application/json", "Authorization", "Bearer "+pubRS)
		if res.status != 200 {
			t.Fatalf("status %d %s", res.status, res.body)
		}
		var out []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		}
		if err := json.Unmarshal([]byte(res.body), &out); err != nil {
			t.Fatal(err)
		}
		if len(out) != 3 || out[0].Status != 201 || out[1].Status != 403 || out[1].Error != "forbidden" || out[2].Status != 201 {
			t.Fatalf("results %+v, want 201, 403 forbidden, 201", out)
		}
	})
	t.Run("POST batch/no credential", func(t *testing.T) {
		res := do(t, http.MethodPost, p.public.URL+"/events", `[{"room":"team-7.a","body":1}]`, "Content-Type", "application/json")
		if res.status != 401 {
			t.Fatalf("status %d, want 401", res.status)
		}
	})

	tickets := []struct {
		name    string
		body    string
		headers []string
		want    int
	}{
		{name: "no credential", want: 401},
		{name: "bearer JWT", headers: bearer(rs), want: 201},
		{name: "cookie", headers: []string{"Cookie", cookie(rs)}, want: 201},
		{name: "expired JWT", headers: bearer(keys.Sign(t, "RS256", claims(func(c gatewaytest.Claims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))), want: 401},
		{name: "static key names the user", body: `{"sub":"bob","subscribe":["u.bob"]}`, headers: append(bearer(testStaticKey), "Content-Type", "application/json"), want: 201},
		{name: "JWT publisher within its grants", body: `{"sub":"svc","subscribe":["team-7.x"]}`, headers: append(bearer(pubRS), "Content-Type", "application/json"), want: 201},
		{name: "JWT publisher naming another user", body: `{"sub":"bob","subscribe":["team-7.x"]}`, headers: append(bearer(pubRS), "Content-Type", "application/json"), want: 403},
		{name: "JWT publisher beyond its grants", body: `{"sub":"bob","subscribe":["team-8.x"]}`, headers: append(bearer(pubRS), "Content-Type", "application/json"), want: 403},
		{name: "JWT publisher asking its pattern's bare prefix", body: `{"sub":"bob","subscribe":["team-7."]}`, headers: append(bearer(pubRS), "Content-Type", "application/json"), want: 403},
		{name: "JWT publisher asking a wider pattern", body: `{"sub":"bob","subscribe":["team-*"]}`, headers: append(bearer(pubRS), "Content-Type", "application/json"), want: 403},
		{name: "subscriber token cannot name a user", body: `{"sub":"bob","subscribe":["team-7.x"]}`, headers: append(bearer(rs), "Content-Type", "application/json"), want: 403},
		{name: "malformed body", body: `{"sub":`, headers: append(bearer(testStaticKey), "Content-Type", "application/json"), want: 400},
		{name: "unknown field", body: `{"sub":"bob","subscribe":["a"],"admin":true}`, headers: append(bearer(testStaticKey), "Content-Type", "application/json"), want: 400},
		{name: "bad pattern", body: `{"sub":"bob","subscribe":["a*b"]}`, headers: append(bearer(testStaticKey), "Content-Type", "application/json"), want: 400},
	}
	for _, tc := range tickets {
		t.Run("POST tickets/"+tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, p.public.URL+"/tickets", tc.body, tc.headers...)
			if res.status != tc.want {
				t.Fatalf("status %d (%s), want %d", res.status, res.body, tc.want)
			}
		})
	}

	t.Run("POST tickets/a backend's ticket opens the named room only", func(t *testing.T) {
		res := do(t, http.MethodPost, p.public.URL+"/tickets", `{"sub":"bob","subscribe":["u.bob"]}`,
			"Authorization", "Bearer "+testStaticKey, "Content-Type", "application/json")
		var out struct{ Ticket string }
		if err := json.Unmarshal([]byte(res.body), &out); err != nil || out.Ticket == "" {
			t.Fatalf("%d %s", res.status, res.body)
		}
		if got := openStatus(t, p.public.URL, "u.ana", "ticket="+out.Ticket); got != 403 {
			t.Fatalf("other room: %d, want 403", got)
		}
	})

	admins := []struct {
		name string
		body string
		want int
	}{
		{name: "sub", body: `{"sub":"mallory"}`, want: 200},
		{name: "jti", body: `{"jti":"t-1"}`, want: 200},
		{name: "both", body: `{"sub":"a","jti":"b"}`, want: 400},
		{name: "neither", body: `{}`, want: 400},
		{name: "too long", body: `{"sub":"` + strings.Repeat("x", 257) + `"}`, want: 400},
		{name: "not JSON", body: `sub=a`, want: 400},
	}
	for _, tc := range admins {
		t.Run("POST admin revoke/"+tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, p.admin.URL+"/admin/revoke", tc.body, "Content-Type", "application/json")
			if res.status != tc.want {
				t.Fatalf("status %d (%s), want %d", res.status, res.body, tc.want)
			}
		})
	}
	t.Run("POST admin revoke/not on the public listener", func(t *testing.T) {
		if res := do(t, http.MethodPost, p.public.URL+"/admin/revoke", `{"sub":"a"}`, "Content-Type", "application/json"); res.status != 404 {
			t.Fatalf("status %d, want 404", res.status)
		}
	})
}

// TestOpenModeKeepsTodaysBehaviour: with no key of any kind, every room is readable
// without a credential and only loopback clients publish.
func TestOpenModeKeepsTodaysBehaviour(t *testing.T) {
	p := newPod(t, podConfig{})
	if got := openStatus(t, p.public.URL, "team-7.a", ""); got != 200 {
		t.Fatalf("stream: %d", got)
	}
	p.publish(t, "team-7.a", `1`)
	if res := do(t, http.MethodPost, p.public.URL+"/tickets", ""); res.status != 401 {
		t.Fatalf("POST /tickets without a credential: %d, want 401", res.status)
	}
}

// TestAnonymousRoomsPerAddress: one client address cannot take the pod's anonymous
// rooms from every other. Its streams, one room or several, SSE or WebSocket, hold
// at most MaxAnonymousRoomsPerIP rooms; one for a further room is turned away (a
// room it holds already still takes more streams), and another address still gets
// its rooms.
func TestAnonymousRoomsPerAddress(t *testing.T) {
	cfg := gateway.Config{MaxAnonymousRooms: 100, MaxAnonymousRoomsPerIP: 3, ClientIPHeader: "X-Forwarded-For",
		RetryMin: time.Second, RetryMax: 2 * time.Second}
	p := newPod(t, podConfig{gw: cfg})
	from := func(addr string) []string { return []string{"X-Forwarded-For", addr} }

	// A flood from one address: a multiplexed stream, then single rooms.
	p.subscribeMany(t, []string{"flood.1", "flood.2"}, "", from("6.6.6.6")...).anchor()
	expectAnchor(t, p.subscribe(t, "flood.3", "", from("6.6.6.6")...))
	turnedAway(t, p.subscribe(t, "flood.4", "", from("6.6.6.6")...), cfg)
	turnedAway(t, p.subscribeMany(t, []string{"flood.1", "flood.5"}, "", from("6.6.6.6")...), cfg)
	ws := dialWS(t, p, from("6.6.6.6")...)
	ws.hello("c-flood", testBoot(time.Now().UnixMilli(), 1), map[string]string{"flood.6": ""})
	ws.wantClose(1013)
	expectAnchor(t, p.subscribe(t, "flood.1", "", from("6.6.6.6")...))
	if got := p.metrics(t).Value("roomcast_streams_rejected_total", "reason", "anonymous_rooms_ip"); got != 3 {
		t.Fatalf("roomcast_streams_rejected_total{reason=anonymous_rooms_ip} = %v, want 3", got)
	}

	// Another address reads its rooms, the flooded ones among them.
	expectAnchor(t, p.subscribe(t, "news", "", from("7.7.7.7")...))
	p.subscribeMany(t, []string{"flood.4", "lobby"}, "", from("7.7.7.7")...).anchor()
	other := dialWS(t, p, from("7.7.7.7")...)
	other.welcome("c-other", testBoot(time.Now().UnixMilli(), 2), map[string]string{"flood.4": ""})
}

// TestAnonymousRoomsAreCapped: streams without a credential may make the pod hold
// only so many rooms; one more is turned away with 200, a longer retry hint and an
// end, a room already held still takes more streams, and a room freed is free again.
func TestAnonymousRoomsAreCapped(t *testing.T) {
	p := newPod(t, podConfig{gw: gateway.Config{MaxAnonymousRooms: 2}})
	r1 := p.subscribe(t, "r1", "")
	expectAnchor(t, r1)
	r2 := p.subscribe(t, "r2", "")
	expectAnchor(t, r2)

	turned := p.subscribe(t, "r3", "")
	if frames := turned.waitEnd(); len(frames) != 1 || frames[0].retry < 6000 || frames[0].hasID {
		t.Fatalf("a third room: %+v, want only a longer retry hint and the end", frames)
	}
	again := p.subscribe(t, "r1", "")
	expectAnchor(t, again)
	if got := p.metrics(t).Value("roomcast_streams_rejected_total", "reason", "anonymous_rooms"); got != 1 {
		t.Fatalf("roomcast_streams_rejected_total{reason=anonymous_rooms} = %v, want 1", got)
	}

	r2.close()
	replaytest.Eventually(t, 10*time.Second, "r2 to be freed", func() bool {
		s := p.subscribe(t, "r3", "")
		defer s.close()
		s.nextAny() // the retry hint
		f, ok := s.nextAny()
		return ok && f.hasID // the anchor: admitted
	})
}
