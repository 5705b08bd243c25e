package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/roomcast/roomcast/gateway"
	"github.com/roomcast/roomcast/replay"
)

// fakeOwners is a fleet's client registry in the test: claims by identity and boot
// order, pod notices through channels, and hooks that hold calls so a test forces an
// order.
type fakeOwners struct {
	mu       sync.Mutex
	entries  map[string]replay.Owner
	notices  map[string]chan string
	drop     bool                         // lose every notice (delivery is at most once)
	onRefres func(client, session string) // runs before a refresh is decided
	claimed  func(o replay.Owner)         // runs once a claim has taken the client, before it returns
}

func newFakeOwners() *fakeOwners {
	return &fakeOwners{entries: map[string]replay.Owner{}, notices: map[string]chan string{}}
}

func (f *fakeOwners) ch(pod string) chan string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.notices[pod]
	if c == nil {
		c = make(chan string, 16)
		f.notices[pod] = c
	}
	return c
}

func (f *fakeOwners) ClaimClient(_ context.Context, o replay.Owner, _ time.Duration) (replay.Owner, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[o.Client]
	switch {
	case ok && e.Identity != o.Identity:
		return e, replay.ErrOtherIdentity
	case ok && e.Boot > o.Boot:
		return e, replay.ErrSuperseded
	}
	o.Since = time.Now()
	f.entries[o.Client] = o
	if hook := f.claimed; hook != nil {
		f.mu.Unlock()
		hook(o)
		f.mu.Lock()
	}
	return e, nil
}

func (f *fakeOwners) RefreshClient(_ context.Context, o replay.Owner, _ time.Duration) (bool, error) {
	f.mu.Lock()
	hook := f.onRefres
	f.mu.Unlock()
	if hook != nil {
		hook(o.Client, o.Session)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[o.Client]
	switch {
	case !ok:
		o.Since = time.Now()
		f.entries[o.Client] = o
		return true, nil
	case e.Session != o.Session:
		return false, replay.ErrNotOwner
	}
	return false, nil
}

func (f *fakeOwners) ReleaseClient(_ context.Context, client, session string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.entries[client]; ok && e.Session == session {
		delete(f.entries, client)
	}
	return nil
}

func (f *fakeOwners) ClientOwner(_ context.Context, client string) (replay.Owner, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.entries[client]
	return e, ok, nil
}

func (f *fakeOwners) NotifyPod(_ context.Context, pod, notice string) error {
	f.mu.Lock()
	drop := f.drop
	f.mu.Unlock()
	if !drop {
		f.ch(pod) <- notice
	}
	return nil
}

func (f *fakeOwners) PodNotices(ctx context.Context, pod string, fn func(string)) error {
	c := f.ch(pod)
	for {
		select {
		case <-ctx.Done():
			return nil
		case n := <-c:
			fn(n)
		}
	}
}

func (f *fakeOwners) owner(client string) replay.Owner {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.entries[client]
}

// newOwnedPod is a pod named id over the shared registry, watching its notices.
func newOwnedPod(t *testing.T, id string, owners *fakeOwners, ttl time.Duration) *pod {
	t.Helper()
	p := newPod(t, podConfig{gw: gateway.Config{PodID: id, Owners: owners, Notices: owners, OwnerTTL: ttl}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.WatchOwners(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

var (
	bootOld = testBoot(1_700_000_000_000, 1)
	bootNew = testBoot(1_700_000_000_500, 2)
)

func TestWSOwnerOnAnotherPodIsClosedWith4409(t *testing.T) {
	owners := newFakeOwners()
	a := newOwnedPod(t, "pod-a", owners, time.Minute)
	b := newOwnedPod(t, "pod-b", owners, time.Minute)

	first := dialWS(t, a)
	first.welcome("rig-7", bootOld, map[string]string{"cmd": ""})
	// The same process reconnects to the other pod: an equal boot takes over.
	second := dialWS(t, b)
	w := second.welcome("rig-7", bootOld, map[string]string{"cmd": ""})
	first.wantClose(4409)
	if o := owners.owner("rig-7"); o.Pod != "pod-b" || o.Session != w.Session {
		t.Fatalf("owner %+v, want pod-b %s", o, w.Session)
	}
	// Pod a sees the client on pod b.
	status, ci := a.client(t, "rig-7")
	if status != http.StatusOK || ci.Local || ci.Pod != "pod-b" || ci.Session != w.Session || ci.Boot != bootOld {
		t.Fatalf("pod a's view: %d %+v", status, ci)
	}

	// A newer boot (the process restarted) takes over again, back on pod a.
	third := dialWS(t, a)
	w3 := third.welcome("rig-7", bootNew, map[string]string{"cmd": ""})
	second.wantClose(4409)
	// The older boot is refused while the newer one holds the client.
	stale := dialWS(t, b)
	stale.hello("rig-7", bootOld, map[string]string{"cmd": ""})
	if frames := stale.wantClose(4409); len(frames) != 0 {
		t.Fatalf("a superseded hello got %+v", frames)
	}
	if o := owners.owner("rig-7"); o.Session != w3.Session {
		t.Fatalf("owner %+v, want %s", o, w3.Session)
	}

	// An operator closes it from the other pod: pod a closes it with 4409.
	res := do(t, http.MethodPost, b.admin.URL+"/admin/clients/rig-7/close", "")
	if res.status != http.StatusAccepted {
		t.Fatalf("close from pod b: %d %s", res.status, res.body)
	}
	third.wantClose(4409)
	if res := do(t, http.MethodPost, a.admin.URL+"/admin/clients/rig-7/close", ""); res.status != http.StatusNotFound {
		t.Fatalf("close of a gone client: %d %s", res.status, res.body)
	}
}

// TestWSStaleRefreshAfterTakeoverCloses4409 forces the order: connection A holds
// the client and its refresh is held in the registry; B takes over (its notice to
// A's pod is lost); then A's refresh lands. It is refused, A is closed with 4409,
// and B keeps the client.
func TestWSStaleRefreshAfterTakeoverCloses4409(t *testing.T) {
	owners := newFakeOwners()
	owners.drop = true
	a := newOwnedPod(t, "pod-a", owners, 30*time.Millisecond)
	b := newOwnedPod(t, "pod-b", owners, time.Minute)

	held := make(chan string, 1)
	release := make(chan struct{})
	var once sync.Once
	owners.mu.Lock()
	owners.onRefres = func(client, session string) {
		if client != "rig-9" {
			return
		}
		once.Do(func() {
			held <- session
			<-release
		})
	}
	owners.mu.Unlock()

	first := dialWS(t, a)
	wa := first.welcome("rig-9", bootOld, map[string]string{"cmd": ""})
	if s := <-held; s != wa.Session {
		t.Fatalf("held refresh of %s, want %s", s, wa.Session)
	}
	second := dialWS(t, b)
	wb := second.welcome("rig-9", bootNew, map[string]string{"cmd": ""})
	close(release)
	first.wantClose(4409)
	if o := owners.owner("rig-9"); o.Session != wb.Session || o.Pod != "pod-b" {
		t.Fatalf("owner %+v, want B %s", o, wb.Session)
	}
	// B is still served.
	id := b.publish(t, "cmd", `"go"`)
	if m := second.next(); m.Kind != "event" || m.ID != id {
		t.Fatalf("B got %+v", m)
	}
}

// TestWSOwnerOnOnePod: without a fleet registry the pod keeps one owner per client:
// a newer or equal boot takes over and the old connection is closed with 4409; an
// older boot is refused with 4409, a boot from the future with 4400. Without a JWT
// key every connection is anonymous (one identity) and may claim any id.
func TestWSOwnerOnOnePod(t *testing.T) {
	p := newPod(t, podConfig{})
	first := dialWS(t, p)
	first.welcome("solo", bootOld, map[string]string{"a": ""})
	second := dialWS(t, p)
	second.welcome("solo", bootNew, map[string]string{"a": ""})
	first.wantClose(4409)
	stale := dialWS(t, p)
	stale.hello("solo", bootOld, map[string]string{"a": ""})
	stale.wantClose(4409)
	third := dialWS(t, p)
	third.welcome("solo", bootNew, map[string]string{"a": ""})
	second.wantClose(4409)
	far := dialWS(t, p)
	far.hello("solo", bootFar, map[string]string{"a": ""})
	far.wantClose(4400)
	if status, ci := p.client(t, "solo"); status != http.StatusOK || ci.Identity != "anonymous" || ci.Boot != bootNew {
		t.Fatalf("the entry: %d %+v", status, ci)
	}
	res := do(t, http.MethodPost, p.admin.URL+"/admin/clients/solo/close", "")
	if res.status != http.StatusOK {
		t.Fatalf("close: %d %s", res.status, res.body)
	}
	third.wantClose(4409)
	if status, _ := p.client(t, "solo"); status != http.StatusNotFound {
		t.Fatalf("closed client still listed: %d", status)
	}
}

// Two claims of one client id on one pod take turns: A's claim reaches the registry
// and is held there; B's claim does not start until A's has returned, so the pod's
// map follows the registry's order. Before, B was welcomed, then A's late completion
// closed B with 4409, and A's next refresh closed A: nobody owned the client.
func TestWSClaimsOfOneClientTakeTurnsOnAPod(t *testing.T) {
	owners := newFakeOwners()
	p := newOwnedPod(t, "pod-a", owners, time.Minute)
	aHeld, releaseA, bClaimed := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	owners.claimed = func(o replay.Owner) {
		switch o.Boot {
		case bootOld:
			close(aHeld)
			<-releaseA
		case bootNew:
			bClaimed <- struct{}{}
		}
	}
	a := dialWS(t, p)
	a.hello("turns", bootOld, map[string]string{"r": ""})
	<-aHeld
	b := dialWS(t, p)
	b.hello("turns", bootNew, map[string]string{"r": ""})
	// B's claim must wait for A's: give it the time it would take to get there.
	select {
	case <-bClaimed:
		t.Fatal("B's claim reached the registry while A's claim was still in progress on the pod")
	case <-time.After(300 * time.Millisecond):
	}
	close(releaseA)
	wb := b.next()
	if wb.Kind != "welcome" {
		t.Fatalf("B: want its welcome, got %+v", wb)
	}
	a.wantClose(4409) // after its welcome, or before it
	// B owns the client in the registry and on the pod, and is still served.
	if o := owners.owner("turns"); o.Session != wb.Session {
		t.Fatalf("the registry's owner is session %q, want B's %q", o.Session, wb.Session)
	}
	b.send(`{"v":1,"kind":"ping"}`)
	if m := b.next(); m.Kind != "pong" {
		t.Fatalf("B: want a pong, got %+v", m)
	}
	if status, ci := p.client(t, "turns"); status != http.StatusOK || ci.Session != wb.Session {
		t.Fatalf("the pod's view of the client: %d %+v, want B's session %q", status, ci, wb.Session)
	}
}
