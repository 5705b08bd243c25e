package gatewaytest

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestNextFrame(t *testing.T) {
	in := "retry: 3000\n\n: hb\n\nid: e:1\ndata: {\"seq\":1}\n\nevent: resync\ndata: a\ndata: b\n\n" +
		"id: e:2\r\ndata:x\r\n\r\n\n\n:\n\nretry: nope\n\ndata: cut"
	want := []Frame{
		{Retry: 3000},
		{Retry: -1, Comment: "hb"},
		{ID: "e:1", HasID: true, Data: `{"seq":1}`, HasData: true, Retry: -1},
		{Event: "resync", Data: "a\nb", HasData: true, Retry: -1},
		{ID: "e:2", HasID: true, Data: "x", HasData: true, Retry: -1},
		{Retry: -1},
		{Retry: -1},
	}
	d := NewDecoder(bufio.NewReaderSize(strings.NewReader(in), 16), nil)
	var got []Frame
	for {
		f, err := d.NextFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
	if !slices.Equal(got, want) {
		t.Errorf("frames:\n got %+v\nwant %+v", got, want)
	}
}

// TestAnchorIsAnEvent: the anchor is dispatched like any named event, by Next and
// NextFrame alike, and IsAnchor tells it from the stream's events; its id stays the
// last event ID.
func TestAnchorIsAnEvent(t *testing.T) {
	const in = "retry: 100\n\nid: e:4\nevent: anchor\ndata: {\"room\":\"r\",\"epoch\":\"e\",\"seq\":4}\n\nid: e:5\ndata: {}\n\n"
	d := NewDecoder(bufio.NewReader(strings.NewReader(in)), nil)
	if ev, err := d.Next(); err != nil || !ev.IsAnchor() || string(ev.ID) != "e:4" || !ev.IDSet {
		t.Fatalf("first event %+v %v, want the anchor e:4", ev, err)
	}
	if ev, err := d.Next(); err != nil || ev.IsAnchor() || string(ev.ID) != "e:5" {
		t.Fatalf("second event %+v %v, want the message e:5", ev, err)
	}
	d = NewDecoder(bufio.NewReader(strings.NewReader(in)), nil)
	var anchors []bool
	for f, err := d.NextFrame(); err == nil; f, err = d.NextFrame() {
		anchors = append(anchors, f.IsAnchor())
	}
	if !slices.Equal(anchors, []bool{false, true, false}) {
		t.Fatalf("IsAnchor of the frames %v, want only the second", anchors)
	}
}
