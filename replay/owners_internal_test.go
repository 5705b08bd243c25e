package replay

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDecodeOwner(t *testing.T) {
	const boot = "0190a0b0-c0d0-7abc-9def-0123456789ab"
	cases := []struct {
		name                                        string
		client, boot, session, pod, since, identity string
		ok                                          bool
	}{
		{"Good", "rig-0414", boot, "s1", "pod-a", "1731312000123", "sub:ana", true},
		{"NoIdentity", "rig-0414", boot, "s1", "pod-a", "1731312000123", "", true},
		{"LongIdentity", "rig-0414", boot, "s1", "pod-a", "1731312000123", strings.Repeat("i", MaxIdentityLen+1), false},
		{"NotUTF8Identity", "rig-0414", boot, "s1", "pod-a", "1731312000123", "sub:\xff", false},
		{"UpperBoot", "rig-0414", "0190A0B0-C0D0-7ABC-9DEF-0123456789AB", "s1", "pod-a", "1731312000123", "sub:ana", false},
		{"BadBoot", "rig-0414", boot[:35], "s1", "pod-a", "1731312000123", "sub:ana", false},
		{"EmptySession", "rig-0414", boot, "", "pod-a", "1731312000123", "sub:ana", false},
		{"BadPod", "rig-0414", boot, "s1", "pod a", "1731312000123", "sub:ana", false},
		{"BadClient", "rig{0414}", boot, "s1", "pod-a", "1731312000123", "sub:ana", false},
		{"EmptySince", "rig-0414", boot, "s1", "pod-a", "", "sub:ana", false},
		{"ZeroSince", "rig-0414", boot, "s1", "pod-a", "0", "sub:ana", false},
		{"NegativeSince", "rig-0414", boot, "s1", "pod-a", "-1", "sub:ana", false},
		{"SignedSince", "rig-0414", boot, "s1", "pod-a", "+1731312000123", "sub:ana", false},
		{"LeadingZero", "rig-0414", boot, "s1", "pod-a", "01731312000123", "sub:ana", false},
		{"FractionSince", "rig-0414", boot, "s1", "pod-a", "1731312000123.5", "sub:ana", false},
		{"FarSince", "rig-0414", boot, "s1", "pod-a", "9999999999999999", "sub:ana", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := decodeOwner(tc.client, tc.boot, tc.session, tc.pod, tc.since, tc.identity)
			if ok != tc.ok {
				t.Fatalf("decodeOwner = %+v, %v; want ok %v", o, ok, tc.ok)
			}
			if ok && (o.Client != tc.client || o.Boot != tc.boot || o.Session != tc.session || o.Pod != tc.pod || o.Identity != tc.identity ||
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
	f.Add("rig-0414", "0190a0b0-c0d0-7abc-9def-0123456789ab", "s1", "pod-a", "1731312000123", "sub:ana")
	f.Add("a:b~c", "0190a0b0-c0d0-7abc-bdef-0123456789ab", "A_-z", "p.1", "1", "")
	f.Add("", "", "", "", "", "")
	f.Add("x", "0190A0B0-C0D0-7ABC-9DEF-0123456789AB", "s", "p", "00", "\xff")
	f.Fuzz(func(t *testing.T, client, boot, session, pod, since, identity string) {
		o, ok := decodeOwner(client, boot, session, pod, since, identity)
		if !ok {
			if o != (Owner{}) {
				t.Fatalf("rejected, yet returned %+v", o)
			}
			return
		}
		if o.Client != client || o.Boot != boot || o.Session != session || o.Pod != pod || o.Identity != identity ||
			strconv.FormatInt(o.Since.UnixMilli(), 10) != since {
			t.Fatalf("decodeOwner(%q, %q, %q, %q, %q, %q) = %+v: not its input", client, boot, session, pod, since, identity, o)
		}
		if canon, err := ParseBoot(boot); err != nil || canon != boot {
			t.Fatalf("accepted boot %q: %q, %v", boot, canon, err)
		}
		if !ValidClient(client) || !ValidSession(session) || !ValidPodID(pod) || identity != "" && !ValidIdentity(identity) || o.Since.UnixMilli() <= 0 ||
			o.Since.After(time.UnixMilli(maxSinceMS)) {
			t.Fatalf("accepted %+v", o)
		}
	})
}
