package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/gateway/gatewaytest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func publishRequest(authorization string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/rooms/lobby/events", nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestPublisher(t *testing.T) {
	staticOnly := newAuth(t, auth.Config{PublishKeys: []string{"key-one", "key-two", "key-three"}})
	both := newAuth(t, auth.Config{PublishKeys: []string{"key-one"}, HMACFile: hmacFile(t), Now: replaytest.NewClock(t0).Now})
	open := newAuth(t, auth.Config{})
	jwtTok := gatewaytest.SignWith(t, jwt.SigningMethodHS256, []byte(hmacSecret), "", claims("u1", nil, []string{"team-7.*"}))
	tests := []struct {
		name      string
		a         *auth.Authenticator
		header    string
		wantErr   error
		wantSrc   auth.Source
		wantRooms []string // rooms it may publish to
		notRooms  []string
	}{
		{"first static key", staticOnly, "Bearer key-one", nil, auth.SourceStatic, []string{"any"}, nil},
		{"middle static key", staticOnly, "Bearer key-two", nil, auth.SourceStatic, []string{"any"}, nil},
		{"last static key", staticOnly, "Bearer key-three", nil, auth.SourceStatic, []string{"any"}, nil},
		{"wrong static key", staticOnly, "Bearer key-four", auth.ErrInvalid, "", nil, nil},
		{"prefix of a static key", staticOnly, "Bearer key-on", auth.ErrInvalid, "", nil, nil},
		{"not bearer", staticOnly, "Basic key-one", auth.ErrInvalid, "", nil, nil},
		{"no header with static keys", staticOnly, "", auth.ErrNoCredential, "", nil, nil},
		{"JWT with static keys only", staticOnly, "Bearer " + jwtTok, auth.ErrInvalid, "", nil, nil},
		{"static key beside JWT keys", both, "Bearer key-one", nil, auth.SourceStatic, []string{"any"}, nil},
		{"JWT publish grants", both, "Bearer " + jwtTok, nil, auth.SourceBearer, []string{"team-7.a"}, []string{"team-70", "lobby"}},
		{"no header with JWT keys", both, "", auth.ErrNoCredential, "", nil, nil},
		{"nothing configured", open, "", nil, auth.SourceAnonymous, []string{"any"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.a.Publisher(publishRequest(tt.header))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || p.Source != tt.wantSrc {
				t.Fatalf("Publisher = %+v, %v; want source %q", p, err, tt.wantSrc)
			}
			for _, room := range tt.wantRooms {
				if !p.CanPublish(room) {
					t.Errorf("may not publish to %q", room)
				}
			}
			for _, room := range tt.notRooms {
				if p.CanPublish(room) {
					t.Errorf("may publish to %q", room)
				}
			}
			if p.Sub == "" && p.CanSubscribe("any") && p.Source == auth.SourceStatic {
				t.Errorf("a static key grants subscribe: %+v", p)
			}
		})
	}
}
