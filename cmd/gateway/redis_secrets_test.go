package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roomcast/roomcast/replay"
	"github.com/roomcast/roomcast/replay/redistest"
	"github.com/roomcast/roomcast/replay/replaytest"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRedisFlags(t *testing.T) {
	ca := redistest.NewPKI(t).CAFile
	pwFile := writeFile(t, "pw", "  pw-from-file \n")
	t.Run("PasswordFileAndCA", func(t *testing.T) {
		c, err := parseConfig([]string{"--redis", "rediss://roomcast@10.0.0.1:6380", "--redis-password-file", pwFile, "--redis-tls-ca", ca}, noEnvironment, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		target, tlsCfg, err := redisConnection(c)
		if err != nil {
			t.Fatal(err)
		}
		if target.username != "roomcast" || target.password != "pw-from-file" || !target.tls {
			t.Fatalf("target %q %q tls %v", target.username, target.password, target.tls)
		}
		if tlsCfg == nil || tlsCfg.RootCAs == nil || tlsCfg.MinVersion != tls.VersionTLS12 {
			t.Fatalf("tls config %+v", tlsCfg)
		}
		var line bytes.Buffer
		slog.New(slog.NewTextHandler(&line, nil)).Info("started", c.effective()...)
		for _, want := range []string{"redis=rediss://roomcast:xxxxx@10.0.0.1:6380", "redis_password_file=" + pwFile, "redis_tls_ca=" + ca} {
			if !strings.Contains(line.String(), want) {
				t.Errorf("start-up line lacks %s: %s", want, line.String())
			}
		}
	})
	t.Run("EnvironmentTwins", func(t *testing.T) {
		env := map[string]string{"ROOMCAST_REDIS": "rediss://10.0.0.1:6380", "ROOMCAST_REDIS_PASSWORD_FILE": pwFile, "ROOMCAST_REDIS_TLS_CA": ca}
		c, err := parseConfig(nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		target, tlsCfg, err := redisConnection(c)
		if err != nil || target.password != "pw-from-file" || target.username != "" || tlsCfg == nil || tlsCfg.RootCAs == nil {
			t.Fatalf("from the environment: %+v %v %v", target.addrs, tlsCfg, err)
		}
	})
	t.Run("TLSWithoutCA", func(t *testing.T) {
		c, err := parseConfig([]string{"--redis", "rediss://10.0.0.1:6380"}, noEnvironment, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if _, tlsCfg, err := redisConnection(c); err != nil || tlsCfg == nil || tlsCfg.RootCAs != nil || tlsCfg.MinVersion != tls.VersionTLS12 {
			t.Fatalf("rediss:// without --redis-tls-ca: %+v, %v (want the system roots)", tlsCfg, err)
		}
		c, _ = parseConfig([]string{"--redis", "10.0.0.1:6380"}, noEnvironment, io.Discard)
		if _, tlsCfg, err := redisConnection(c); err != nil || tlsCfg != nil {
			t.Fatalf("redis:// made a tls config: %+v, %v", tlsCfg, err)
		}
	})
	notPEM := writeFile(t, "ca.pem", "not a certificate")
	empty := writeFile(t, "empty", " \n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"CAWithoutTLS", []string{"--redis", "10.0.0.1:6379", "--redis-tls-ca", ca}, "--redis-tls-ca"},
		{"CAWithoutRedis", []string{"--redis-tls-ca", ca}, "--redis-tls-ca"},
		{"CAMissing", []string{"--redis", "rediss://10.0.0.1:6379", "--redis-tls-ca", ca + ".gone"}, "--redis-tls-ca"},
		{"CANotPEM", []string{"--redis", "rediss://10.0.0.1:6379", "--redis-tls-ca", notPEM}, "no PEM certificate"},
		{"PasswordTwice", []string{"--redis", "redis://u:pw-in-url@10.0.0.1:6379", "--redis-password-file", pwFile}, "not both"},
		{"PasswordFileWithoutRedis", []string{"--redis-password-file", pwFile}, "--redis-password-file"},
		{"PasswordFileEmpty", []string{"--redis", "10.0.0.1:6379", "--redis-password-file", empty}, "empty"},
		{"PasswordFileMissing", []string{"--redis", "10.0.0.1:6379", "--redis-password-file", pwFile + ".gone"}, "--redis-password-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig(tc.args, noEnvironment, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseConfig(%q): %v, want an error about %s", tc.args, err, tc.want)
			}
			if strings.Contains(err.Error(), "pw-in-url") || strings.Contains(err.Error(), "pw-from-file") {
				t.Fatalf("the error shows a password: %v", err)
			}
		})
	}
}

// TestRedisSecretsNeverShown: whatever way a Redis password arrives (in --redis, in
// --redis-password-file, over rediss://), neither the start-up line, nor the log's
// own warnings and debug lines, nor any error shows it.
func TestRedisSecretsNeverShown(t *testing.T) {
	redistest.Require(t)
	const urlSecret, fileSecret = "pw-url-s3cret", "pw-file-s3cret"
	pwFile := writeFile(t, "pw", fileSecret+"\n")
	ca := redistest.NewPKI(t).CAFile
	dead := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	live := redistest.SharedStandalone(t).Addr
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"URL", []string{"--redis", "redis://roomcast:" + urlSecret + "@" + dead}},
		{"URLLive", []string{"--redis", "redis://roomcast:" + urlSecret + "@" + live}},
		{"BareCredentials", []string{"--redis", "roomcast:" + urlSecret + "@" + dead}},
		{"File", []string{"--redis", "redis://roomcast@" + live, "--redis-password-file", pwFile}},
		{"TLSFile", []string{"--redis", "rediss://roomcast@" + dead, "--redis-password-file", pwFile, "--redis-tls-ca", ca}},
		{"TLSURLLive", []string{"--redis", "rediss://roomcast:" + urlSecret + "@" + live, "--redis-tls-ca", ca}},
		{"SchemesDisagree", []string{"--redis", "rediss://u:" + urlSecret + "@" + dead + ",redis://u:" + urlSecret + "@" + live}},
		{"PasswordTwice", []string{"--redis", "redis://u:" + urlSecret + "@" + dead, "--redis-password-file", pwFile}},
		{"CAWithoutTLS", []string{"--redis", "redis://u:" + urlSecret + "@" + dead, "--redis-tls-ca", ca}},
		{"BadPath", []string{"--redis", "rediss://u:" + urlSecret + "@" + dead + "/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out replaytest.SyncBuffer
			logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var shown []string
			cfg, err := parseConfig(append(tc.args, "--redis-timeout", "300ms"), noEnvironment, io.Discard)
			if err != nil {
				shown = append(shown, err.Error())
			} else {
				logger.Info("roomcast gateway started", cfg.effective()...)
				log, err := openLog(cfg, logger)
				if err != nil {
					shown = append(shown, err.Error())
				} else {
					ctx := context.Background()
					_, err := log.Append(ctx, "room", replay.Message{Body: []byte(`{}`)})
					shown = append(shown, errString(err))
					if rl, ok := log.(*replay.RedisLog); ok {
						ctl, _ := replay.ControlOf(rl)
						shown = append(shown, errString(rl.Ping(ctx)), errString(ctl.Tickets.PutTicket(ctx, "t", nil, time.Minute)))
						_, err := ctl.Tickets.TakeTicket(ctx, "t")
						shown = append(shown, errString(err))
						if !rl.Health().Up {
							// The background connector's debug line, with its error.
							replaytest.Eventually(t, 20*time.Second, "a failed connect logged", func() bool {
								return strings.Contains(out.String(), "redis connect failed")
							})
						}
					}
					if err := log.Close(ctx); err != nil {
						t.Error(err)
					}
				}
			}
			shown = append(shown, out.String())
			for _, s := range shown {
				for _, secret := range []string{urlSecret, fileSecret} {
					if strings.Contains(s, secret) {
						t.Fatalf("%s shows up in: %s", secret, s)
					}
				}
			}
			if len(out.String()) == 0 && len(shown) < 2 {
				t.Fatalf("nothing was logged or returned: the check checked nothing")
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
