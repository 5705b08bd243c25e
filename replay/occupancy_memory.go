package replay

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// memOccupancy is a MemoryLog's occupancy records (Occupancy): room → pod →
// record. It holds at most maxMemOccupancy records; expired ones are dropped when
// their room is written or read, and by the log's sweep.
type memOccupancy struct {
	l *MemoryLog

	mu    sync.Mutex
	rooms map[string]map[string]memOccRecord
	n     int // records held
}

type memOccRecord struct {
	members          int
	updated, expires time.Time
}

// maxMemOccupancy bounds the records a MemoryLog holds.
const maxMemOccupancy = 1_000_000

var _ Occupancy = (*memOccupancy)(nil)

// SetOccupancy implements Occupancy. Past 1 000 000 records held, a record for a
// new room or pod is ErrFull.
func (o *memOccupancy) SetOccupancy(ctx context.Context, pod string, ttl time.Duration, counts []RoomCount) error {
	if o.l.closed.Load() {
		return ErrClosed
	}
	if !validOccupancy(pod, ttl, counts) {
		return fmt.Errorf("replay: set occupancy: %w", ErrInvalid)
	}
	now := o.l.cfg.Now().Truncate(time.Millisecond)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rooms == nil {
		o.rooms = make(map[string]map[string]memOccRecord)
	}
	for _, c := range counts {
		pods := o.rooms[c.Room]
		o.pruneRoomLocked(c.Room, pods, now)
		pods = o.rooms[c.Room]
		if c.Members == 0 {
			if _, ok := pods[pod]; ok {
				delete(pods, pod)
				o.n--
				if len(pods) == 0 {
					delete(o.rooms, c.Room)
				}
			}
			continue
		}
		if _, ok := pods[pod]; !ok {
			if o.n >= maxMemOccupancy {
				return fmt.Errorf("replay: set occupancy %q: %d records held: %w", c.Room, o.n, ErrFull)
			}
			if pods == nil {
				pods = make(map[string]memOccRecord, 1)
				o.rooms[c.Room] = pods
			}
			o.n++
		}
		pods[pod] = memOccRecord{members: c.Members, updated: now, expires: now.Add(ttl.Truncate(time.Millisecond))}
	}
	return nil
}

// Occupancy implements Occupancy.
func (o *memOccupancy) Occupancy(ctx context.Context, room string) ([]PodCount, error) {
	if o.l.closed.Load() {
		return nil, ErrClosed
	}
	if !ValidRoom(room) {
		return nil, fmt.Errorf("replay: occupancy %q: %w", room, ErrInvalid)
	}
	now := o.l.cfg.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	pods := o.rooms[room]
	o.pruneRoomLocked(room, pods, now)
	out := make([]PodCount, 0, len(o.rooms[room]))
	for pod, r := range o.rooms[room] {
		if len(out) == MaxOccupancyPods {
			break
		}
		out = append(out, PodCount{Pod: pod, Members: r.members, UpdatedAt: r.updated, ExpiresAt: r.expires})
	}
	return out, nil
}

// pruneRoomLocked drops room's expired records.
func (o *memOccupancy) pruneRoomLocked(room string, pods map[string]memOccRecord, now time.Time) {
	for pod, r := range pods {
		if !now.Before(r.expires) {
			delete(pods, pod)
			o.n--
		}
	}
	if pods != nil && len(pods) == 0 {
		delete(o.rooms, room)
	}
}

// prune drops every expired record; the sweeper calls it.
func (o *memOccupancy) prune(now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for room, pods := range o.rooms {
		o.pruneRoomLocked(room, pods, now)
	}
}
