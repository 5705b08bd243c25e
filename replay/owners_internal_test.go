package replay

import (
	"strconv"
	"testing"
	"time"
)

func TestDecodeOwner(t *testing.T) {
	const boot = "0190a0b0-c0d0-7abc-9def-0123456789ab"
	cases := []struct {
		name                              string
		client, boot, session, pod, since string
		ok                                bool
	}{
		{"Good", "rig-0414", boot, "s1", "pod-a", "1731312000123", true},
		{"UpperBoot", "rig-0414", "0190A0B0-C0D0-7ABC-9DEF-0123456789AB", "s1", "pod-a", "1731312000123", false},
		{"BadBoot", "rig-0414", boot[:35], "s1", "pod-a", "1731312000123", false},
		{"EmptySession", "rig-0414", boot, "", "pod-a", "1731312000123", false},
		{"BadPod", "rig-0414", boot, "s1", "pod a", "1731312000123", false},
		{"BadClient", "rig{0414}", boot, "s1", "pod-a", "1731312000123", false},
		{"EmptySince", "rig-0414", boot, "s1", "pod-a", "", false},
		{"ZeroSince", "rig-0414", boot, "s1", "pod-a", "0", false},
		{"NegativeSince", "rig-0414", boot, "s1", "pod-a", "-1", false},
		{"SignedSince", "rig-0414", boot, "s1", "pod-a", "+1731312000123", false},
		{"LeadingZero", "rig-0414", boot, "s1", "pod-a", "01731312000123", false},
		{"FractionSince", "rig-0414", boot, "s1", "pod-a", "1731312000123.5", false},
		{"FarSince", "rig-0414", boot, "s1", "pod-a", "9999999999999999", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := decodeOwner(tc.client, tc.boot, tc.session, tc.pod, tc.since)
			if ok != tc.ok {
				t.Fatalf("decodeOwner = %+v, %v; want ok %v", o, ok, tc.ok)
			}
			if ok && (o.Client != tc.client || o.Boot != tc.boot || o.Session != tc.session || o.Pod != tc.pod ||
				strconv.FormatInt(o.Since.UnixMilli(), 10) != tc.since) {
				t.Fatalf("decodeOwner = %+v", o)
			}
		})
	}
}

// FuzzDecodeOwner: the decoder of stored entries never panics, and what it accepts
// is exactly what a claim could have written: it encodes back to its input and
// passes every validator.
func FuzzDecodeOwner(f *testing.F) {
	f.Add("rig-0414", "0190a0b0-c0d0-7abc-9def-0123456789ab", "s1", "pod-a", "1731312000123")
	f.Add("a:b~c", "0190a0b0-c0d0-7abc-bdef-0123456789ab", "A_-z", "p.1", "1")
	f.Add("", "", "", "", "")
	f.Add("x", "0190A0B0-C0D0-7ABC-9DEF-0123456789AB", "s", "p", "00")
	f.Fuzz(func(t *testing.T, client, boot, session, pod, since string) {
		o, ok := decodeOwner(client, boot, session, pod, since)
		if !ok {
			if o != (Owner{}) {
				t.Fatalf("rejected, yet returned %+v", o)
			}
			return
		}
		if o.Client != client || o.Boot != boot || o.Session != session || o.Pod != pod ||
			strconv.FormatInt(o.Since.UnixMilli(), 10) != since {
			t.Fatalf("decodeOwner(%q, %q, %q, %q, %q) = %+v: not its input", client, boot, session, pod, since, o)
		}
		if canon, err := ParseBoot(boot); err != nil || canon != boot {
			t.Fatalf("accepted boot %q: %q, %v", boot, canon, err)
		}
		if !ValidClient(client) || !ValidSession(session) || !ValidPodID(pod) || o.Since.UnixMilli() <= 0 ||
			o.Since.After(time.UnixMilli(maxSinceMS)) {
			t.Fatalf("accepted %+v", o)
		}
	})
}
