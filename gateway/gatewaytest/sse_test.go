package gatewaytest

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// refEvent is a decoded event in comparable form.
type refEvent struct {
	ID, Type, Data string
}

// referenceDecode is a slow, literal transcription of the HTML standard's
// event-stream interpretation, for checking the fast decoder.
func referenceDecode(in string) (events []refEvent, retry time.Duration, retrySet bool) {
	in = strings.TrimPrefix(in, "\xef\xbb\xbf")
	var lines []string
	for {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			break // an unterminated last line is discarded
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	var data, typ, lastID strings.Builder
	for _, line := range lines {
		if line == "" {
			if data.Len() > 0 {
				d := strings.TrimSuffix(data.String(), "\n")
				events = append(events, refEvent{ID: lastID.String(), Type: typ.String(), Data: d})
			}
			data.Reset()
			typ.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "data":
			data.WriteString(value + "\n")
		case "event":
			typ.Reset()
			typ.WriteString(value)
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID.Reset()
				lastID.WriteString(value)
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				ms, _ := parseDigits([]byte(value))
				retry, retrySet = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	return events, retry, retrySet
}

// decodeAll runs the fast decoder over in with a bufio buffer of size bufSize.
func decodeAll(t testing.TB, in string, bufSize int) ([]refEvent, time.Duration, bool) {
	t.Helper()
	d := NewDecoder(bufio.NewReaderSize(&chunkReader{s: in, n: 7}, bufSize), nil)
	var out []refEvent
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			r, ok := d.Retry()
			return out, r, ok
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, refEvent{ID: string(ev.ID), Type: string(ev.Type), Data: string(ev.Data)})
	}
}

// framesAsEvents runs NextFrame over in and keeps what EventSource would dispatch:
// the frames with data, with the last id in force.
func framesAsEvents(t testing.TB, in string, bufSize int) []refEvent {
	t.Helper()
	d := NewDecoder(bufio.NewReaderSize(&chunkReader{s: in, n: 7}, bufSize), nil)
	var out []refEvent
	lastID := ""
	for {
		f, err := d.NextFrame()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("NextFrame: %v", err)
		}
		if f.HasID {
			lastID = f.ID
		}
		if f.HasData {
			out = append(out, refEvent{ID: lastID, Type: f.Event, Data: f.Data})
		}
	}
}

// chunkReader returns at most n bytes per Read, to exercise partial reads.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.s) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[n:]
	return n, nil
}

func TestDecoder(t *testing.T) {
	long := strings.Repeat("y", 100)
	tests := []struct {
		name      string
		in        string
		want      []refEvent
		wantRetry time.Duration
	}{
		{name: "empty", in: ""},
		{name: "one event", in: "id: e:1\ndata: {\"seq\":1}\n\n",
			want: []refEvent{{ID: "e:1", Data: `{"seq":1}`}}},
		{name: "typed event", in: "event: resync\ndata: x\n\n",
			want: []refEvent{{Type: "resync", Data: "x"}}},
		{name: "multi-line data", in: "data: a\ndata: b\ndata\n\n",
			want: []refEvent{{Data: "a\nb\n"}}},
		{name: "no space after colon", in: "data:a\n\n", want: []refEvent{{Data: "a"}}},
		{name: "only one space stripped", in: "data:  a\n\n", want: []refEvent{{Data: " a"}}},
		{name: "CRLF", in: "id: 1\r\ndata: a\r\n\r\n", want: []refEvent{{ID: "1", Data: "a"}}},
		{name: "bare CR", in: "id: 1\rdata: a\r\r", want: []refEvent{{ID: "1", Data: "a"}}},
		{name: "mixed endings", in: "data: a\r\ndata: b\rdata: c\n\r\n", want: []refEvent{{Data: "a\nb\nc"}}},
		{name: "comments and heartbeats", in: ": hb\n\n:\ndata: a\n: hb\n\n", want: []refEvent{{Data: "a"}}},
		{name: "retry first, then event", in: "retry: 3000\n\nid: hub:1\ndata: a\n\n",
			want: []refEvent{{ID: "hub:1", Data: "a"}}, wantRetry: 3 * time.Second},
		{name: "bad retry ignored", in: "retry: 3000\nretry: 12a\nretry:\n\n", wantRetry: 3 * time.Second},
		{name: "id persists", in: "id: 7\ndata: a\n\ndata: b\n\n",
			want: []refEvent{{ID: "7", Data: "a"}, {ID: "7", Data: "b"}}},
		{name: "id with NUL ignored", in: "id: 7\ndata: a\n\nid: 8\x00\ndata: b\n\n",
			want: []refEvent{{ID: "7", Data: "a"}, {ID: "7", Data: "b"}}},
		{name: "empty data block resets type", in: "event: x\n\ndata: a\n\n", want: []refEvent{{Data: "a"}}},
		{name: "unknown field ignored", in: "foo: bar\ndata: a\n\n", want: []refEvent{{Data: "a"}}},
		{name: "unterminated event discarded", in: "data: a\n\ndata: b\n", want: []refEvent{{Data: "a"}}},
		{name: "unterminated line discarded", in: "data: a\n\ndata: b", want: []refEvent{{Data: "a"}}},
		{name: "BOM", in: "\xef\xbb\xbfdata: a\n\n", want: []refEvent{{Data: "a"}}},
		{name: "line longer than buffer", in: "data: " + long + "\n\n", want: []refEvent{{Data: long}}},
		{name: "CR at end of stream terminates", in: "data: a\n\r", want: []refEvent{{Data: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{16, 4096} {
				got, retry, _ := decodeAll(t, tt.in, size)
				if !equalEvents(got, tt.want) {
					t.Errorf("buf %d: events = %q, want %q", size, got, tt.want)
				}
				if retry != tt.wantRetry {
					t.Errorf("buf %d: retry = %v, want %v", size, retry, tt.wantRetry)
				}
			}
			ref, _, _ := referenceDecode(tt.in)
			if !equalEvents(ref, tt.want) {
				t.Errorf("reference decoder disagrees with the table: %q", ref)
			}
		})
	}
}

func TestDecoderSeededLastID(t *testing.T) {
	d := NewDecoder(bufio.NewReader(strings.NewReader("data: a\n\n")), []byte("e:9"))
	ev, err := d.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(ev.ID) != "e:9" || ev.IDSet {
		t.Errorf("ID = %q (set %v), want the seeded e:9, not set", ev.ID, ev.IDSet)
	}
}

func TestDecoderLineTooLong(t *testing.T) {
	in := io.MultiReader(strings.NewReader("data: "), io.LimitReader(repeatReader('x'), maxLineBytes+1<<16))
	d := NewDecoder(bufio.NewReaderSize(in, 1<<16), nil)
	if _, err := d.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
}

type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func TestFieldHelpers(t *testing.T) {
	data := []byte(`{"room":"r","epoch":"k3x9q","seq":48,"ts":1731312000123,"type":"message","body":{"t":1700000000000000001,"p":"xx"}}`)
	tests := []struct {
		name string
		key  string
		want uint64
		ok   bool
	}{
		{name: "seq", key: `"seq":`, want: 48, ok: true},
		{name: "t is not ts", key: `"t":`, want: 1700000000000000001, ok: true},
		{name: "ts", key: `"ts":`, want: 1731312000123, ok: true},
		{name: "missing", key: `"nope":`},
		{name: "not a number", key: `"room":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := UintAfter(data, []byte(tt.key))
			if got != tt.want || ok != tt.ok {
				t.Errorf("UintAfter(%s) = %d, %v; want %d, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
	if _, ok := UintAfter([]byte(`"seq":99999999999999999999999`), []byte(`"seq":`)); ok {
		t.Error("UintAfter accepted an overflowing number")
	}
	if e, ok := StringAfter(data, []byte(`"epoch":"`)); !ok || string(e) != "k3x9q" {
		t.Errorf("StringAfter(epoch) = %q, %v", e, ok)
	}
}

func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		"", "data: a\n\n", "id: e:1\nevent: resync\ndata: {}\n\n", "retry: 10\r\n\r\n",
		"data: a\rdata: b\r\r", ": hb\n\n", "\xef\xbb\xbfdata\n\n", "id: a\x00b\ndata: x\n\n",
		"data: a\n\r", "event:x\n\ndata:\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		want, wantRetry, wantSet := referenceDecode(in)
		for _, size := range []int{16, 64, 4096} {
			got, retry, set := decodeAll(t, in, size)
			if !equalEvents(got, want) {
				t.Fatalf("buf %d: events = %q, want %q", size, got, want)
			}
			if retry != wantRetry || set != wantSet {
				t.Fatalf("buf %d: retry = %v %v, want %v %v", size, retry, set, wantRetry, wantSet)
			}
			if frames := framesAsEvents(t, in, size); !equalEvents(frames, want) {
				t.Fatalf("buf %d: frames as events = %q, want %q", size, frames, want)
			}
			for _, ev := range got {
				if strings.ContainsAny(ev.ID, "\r\n\x00") || strings.ContainsAny(ev.Type, "\r\n") {
					t.Fatalf("field carries a line break or NUL: %q", ev)
				}
			}
		}
	})
}

func equalEvents(a, b []refEvent) bool { return slices.Equal(a, b) }

func BenchmarkDecoder(b *testing.B) {
	frame := "id: k3x9q:48\ndata: {\"room\":\"load-0\",\"epoch\":\"k3x9q\",\"seq\":48,\"ts\":1731312000123,\"type\":\"message\",\"body\":{\"t\":1700000000000000001,\"p\":\"" +
		strings.Repeat("x", 64) + "\"}}\n\n"
	in := strings.Repeat(frame, 1000)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	br := bufio.NewReaderSize(nil, 16<<10)
	for b.Loop() {
		br.Reset(strings.NewReader(in))
		d := NewDecoder(br, nil)
		for {
			ev, err := d.Next()
			if err != nil {
				break
			}
			if _, ok := UintAfter(ev.Data, []byte(`"seq":`)); !ok {
				b.Fatal("no seq")
			}
			_, _ = UintAfter(ev.Data, []byte(`"t":`))
		}
	}
}
