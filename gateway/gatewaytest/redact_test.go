package gatewaytest

import (
	"strings"
	"testing"
)

func TestRedactorFindsSecrets(t *testing.T) {
	var r Redactor
	token := r.Secret("a token", "eyJhbGciOiJFZERTQSJ9.payload.signature")
	r.Secret("too short to count", "abc")
	r.Logger().Info("stream opened", "sub", "ana")
	if err := r.Check(); err != nil {
		t.Fatalf("clean logs: %v", err)
	}
	r.Logger().Warn("refused", "authorization", "Bearer "+token)
	err := r.Check()
	if err == nil || !strings.Contains(err.Error(), "a token in a log line beginning") {
		t.Fatalf("Check = %v, want the token found", err)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatal("the report repeats the secret")
	}
	_, _ = r.Write([]byte("abc\n"))
	if err := r.Check(); err == nil || strings.Contains(err.Error(), "too short") {
		t.Fatalf("a short string was registered: %v", err)
	}
}
