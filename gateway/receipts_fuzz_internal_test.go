package gateway

import (
	"strings"
	"testing"
	"time"
)

func TestParseWaitFor(t *testing.T) {
	cases := []struct {
		name  string
		value string
		want  time.Duration // 0: refused
	}{
		{"Ack", "ack", DefaultReceiptWait},
		{"AnyCase", "ACK", DefaultReceiptWait},
		{"Seconds", "ack; timeout=5s", 5 * time.Second},
		{"Milliseconds", "ack;timeout=2500ms", 2500 * time.Millisecond},
		{"Spaces", "  ack ;  Timeout=1ms ", time.Millisecond},
		{"TheMax", "ack; timeout=30000ms", MaxReceiptWait},
		{"OverTheMax", "ack; timeout=30001ms", 0},
		{"Zero", "ack; timeout=0ms", 0},
		{"Minutes", "ack; timeout=1m", 0},
		{"Fraction", "ack; timeout=1.5s", 0},
		{"Signed", "ack; timeout=+5s", 0},
		{"NoValue", "ack; timeout=", 0},
		{"SevenDigits", "ack; timeout=0000005s", 0},
		{"TwoParameters", "ack; timeout=5s; timeout=6s", 0},
		{"OtherParameter", "ack; q=1", 0},
		{"Empty", "", 0},
		{"Other", "delivery", 0},
		{"TooLong", "ack; timeout=5s" + strings.Repeat(" ", 60), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, aerr := parseWaitFor([]string{tc.value})
			if tc.want == 0 && (aerr == nil || aerr.Code != "invalid_wait" || aerr.Status != 400) {
				t.Fatalf("parseWaitFor(%q) = %v, %v; want invalid_wait", tc.value, d, aerr)
			}
			if tc.want != 0 && (aerr != nil || d != tc.want) {
				t.Fatalf("parseWaitFor(%q) = %v, %v; want %v", tc.value, d, aerr, tc.want)
			}
		})
	}
	if _, aerr := parseWaitFor([]string{"ack", "ack"}); aerr == nil {
		t.Fatal("two Wait-For headers accepted")
	}
}

// FuzzParseWaitFor: the Wait-For parser never panics, accepts only timeouts from
// 1ms to MaxReceiptWait in a value of at most 64 bytes, and refuses with a 400
// invalid_wait whose message is its own (it never repeats the value).
func FuzzParseWaitFor(f *testing.F) {
	for _, s := range []string{"ack", "ack; timeout=5s", "ack;timeout=30000ms", "ack; timeout=999999s", "ACK ; TIMEOUT=1ms", ";", "ack;;", "ack; timeout=ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, aerr := parseWaitFor([]string{v})
		if aerr != nil {
			if aerr.Status != 400 || aerr.Code != "invalid_wait" || d != 0 || len(v) > 16 && strings.Contains(aerr.Message, v) {
				t.Fatalf("parseWaitFor(%q) refused with %d %s %q (%v)", v, aerr.Status, aerr.Code, aerr.Message, d)
			}
			return
		}
		if d < time.Millisecond || d > MaxReceiptWait || len(v) > 64 {
			t.Fatalf("parseWaitFor(%q) = %v", v, d)
		}
	})
}
