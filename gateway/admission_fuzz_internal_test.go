package gateway

import (
	"strings"
	"testing"
)

// FuzzForwardedAddr: any value of the trusted client address header. Only the last
// entry counts, an address it finds reads back as itself, and what precedes the last
// comma (the client's own entries) never changes the answer.
func FuzzForwardedAddr(f *testing.F) {
	for _, v := range []string{"10.0.0.1", "6.6.6.6, 10.0.0.1", "unknown", "[2001:db8::1]:80", "10.0.0.5:4711", " ", "::ffff:1.2.3.4", "fe80::1%eth0"} {
		f.Add(v, "7.7.7.7")
	}
	f.Fuzz(func(t *testing.T, v, before string) {
		ip, ok := forwardedAddr(v)
		if ok {
			if again, ok2 := forwardedAddr(ip.String()); !ok2 || again != ip {
				t.Fatalf("%q: %v, which reads back as %v, %v", v, ip, again, ok2)
			}
		}
		if strings.Contains(v, ",") {
			return
		}
		if ip2, ok2 := forwardedAddr(before + "," + v); ok2 != ok || ip2 != ip {
			t.Fatalf("%q: %v %v, but after %q: %v %v", v, ip, ok, before, ip2, ok2)
		}
	})
}
