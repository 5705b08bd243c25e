package replay

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Occupancy is the fleet's view of who holds a room: each pod records how many
// members it holds in each of its rooms, with a TTL, so a pod that dies drops out
// of the view within the TTL. Both logs' control planes implement it (ControlOf);
// a MemoryLog's knows of one pod only, the one it runs in.
type Occupancy interface {
	// SetOccupancy records, for each of counts, that pod holds Members members of
	// Room, until ttl passes; Members 0 removes the pod's record of Room at once.
	// pod passes ValidPodID, every Room ValidRoom, Members is not negative, ttl is
	// at least a millisecond and counts holds at most MaxOccupancyBatch entries;
	// anything else is ErrInvalid. Repeating a call is safe. On error, some of
	// counts may have been recorded and others not: callers repeat the call.
	SetOccupancy(ctx context.Context, pod string, ttl time.Duration, counts []RoomCount) error
	// Occupancy returns the pods whose record of room has not expired, in no
	// particular order, at most MaxOccupancyPods of them.
	Occupancy(ctx context.Context, room string) ([]PodCount, error)
}

// RoomCount is one pod's member count of one room.
type RoomCount struct {
	Room    string
	Members int
}

// PodCount is one pod's record of a room.
type PodCount struct {
	Pod       string
	Members   int
	UpdatedAt time.Time // when the pod recorded it, millisecond precision
	ExpiresAt time.Time // when it drops out unless recorded again
}

const (
	// MaxOccupancyBatch bounds the counts of one SetOccupancy call.
	MaxOccupancyBatch = 1000
	// MaxOccupancyPods bounds the pods Occupancy reports for one room.
	MaxOccupancyPods = 1000
	// maxOccupancyMembers bounds one count: 15 digits, as the functions read them.
	maxOccupancyMembers = 999_999_999_999_999
)

// validOccupancy checks SetOccupancy's arguments.
func validOccupancy(pod string, ttl time.Duration, counts []RoomCount) bool {
	if !ValidPodID(pod) || ttl < time.Millisecond || len(counts) > MaxOccupancyBatch {
		return false
	}
	for _, c := range counts {
		if !ValidRoom(c.Room) || c.Members < 0 || c.Members > maxOccupancyMembers {
			return false
		}
	}
	return true
}

// encodeOccupancy is a pod's stored record of a room: "<members> <expires> <updated>",
// both times in Unix milliseconds.
func encodeOccupancy(members int, expires, updated int64) string {
	return strconv.Itoa(members) + " " + strconv.FormatInt(expires, 10) + " " + strconv.FormatInt(updated, 10)
}

// ParseOccupancy reads a stored record, "<members> <expires> <updated>": decimal
// integers of at most 15 digits without signs or leading zeros (but "0"), one
// space apart; members at least 1, updated not after expires. What Redis hands
// back is input: anything else is an error.
func ParseOccupancy(s string) (members int, expires, updated int64, err error) {
	return parseRecord(s, 1)
}

// parseRecord reads "<count> <expires> <updated>" as ParseOccupancy does, with
// count at least least.
func parseRecord(s string, least int64) (count int, expires, updated int64, err error) {
	if len(s) > 3*15+2 {
		return 0, 0, 0, fmt.Errorf("replay: occupancy record of %d bytes", len(s))
	}
	f := strings.Split(s, " ")
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("replay: occupancy record %q: want 3 fields", s)
	}
	var n [3]int64
	for i, x := range f {
		v, ok := occupancyInt(x)
		if !ok {
			return 0, 0, 0, fmt.Errorf("replay: occupancy record %q: field %d is not a count", s, i+1)
		}
		n[i] = v
	}
	if n[0] < least || n[2] > n[1] {
		return 0, 0, 0, fmt.Errorf("replay: occupancy record %q: out of range", s)
	}
	return int(n[0]), n[1], n[2], nil
}

// occupancyInt parses 1 to 15 decimal digits, no leading zero unless it is "0".
func occupancyInt(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// livePods turns stored records (field, value pairs, as HGETALL gives them) into
// the pods whose record is still in force at now (Unix ms). Malformed records are
// skipped and counted in bad.
func livePods(fields []string, now int64) (pods []PodCount, bad int) {
	return liveRecords(fields, now, 1, MaxOccupancyPods, func(pod string, n int, updated, expires time.Time) PodCount {
		return PodCount{Pod: pod, Members: n, UpdatedAt: updated, ExpiresAt: expires}
	})
}

// liveRecords turns stored records "<count> <expires> <updated>" (field, value
// pairs, as HGETALL gives them), counts at least least, into up to limit values
// made by mk of those still in force at now (Unix ms). Malformed records are skipped
// and counted in bad.
func liveRecords[T any](fields []string, now, least int64, limit int, mk func(pod string, n int, updated, expires time.Time) T) (out []T, bad int) {
	for i := 0; i+1 < len(fields) && len(out) < limit; i += 2 {
		pod, value := fields[i], fields[i+1]
		n, expires, updated, err := parseRecord(value, least)
		if err != nil || !ValidPodID(pod) {
			bad++
			continue
		}
		if expires <= now {
			continue
		}
		out = append(out, mk(pod, n, time.UnixMilli(updated), time.UnixMilli(expires)))
	}
	return out, bad
}
