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
