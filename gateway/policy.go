package gateway

import (
	"fmt"
	"strings"

	"github.com/roomcast/roomcast/gateway/auth"
	"github.com/roomcast/roomcast/rooms"
)

// maxRoomPolicies bounds the entries of a RoomPolicies.
const maxRoomPolicies = 256

// RoomPolicy is one entry of --room-policy: the queue policy of the rooms a pattern
// covers (a room name, or a prefix ending in "*", as in an access grant).
type RoomPolicy struct {
	Pattern auth.Pattern
	Policy  rooms.Policy
}

// RoomPolicies are the queue policies by room pattern. A room takes the policy of the
// pattern that covers it, by the length of its name or prefix (a room's own name wins
// over every prefix); a room no pattern covers takes rooms.PolicyClose.
type RoomPolicies []RoomPolicy

// ParseRoomPolicies reads entries of the form pattern=policy ("ticker.*=latest",
// "feed.*=drop-oldest", "orders=close"); blanks around either side are ignored. It
// fails on an entry without "=", a bad pattern or policy, a pattern given twice or
// more than 256 entries.
func ParseRoomPolicies(list []string) (RoomPolicies, error) {
	if len(list) > maxRoomPolicies {
		return nil, fmt.Errorf("gateway: room policies: %d entries, at most %d", len(list), maxRoomPolicies)
	}
	ps := make(RoomPolicies, 0, len(list))
	for _, e := range list {
		pat, pol, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("gateway: room policy %.64q: want pattern=policy, e.g. ticker.*=latest", e)
		}
		p, err := auth.ParsePattern(strings.TrimSpace(pat))
		if err != nil {
			return nil, fmt.Errorf("gateway: room policy %.64q: %w", e, err)
		}
		policy, err := rooms.ParsePolicy(strings.TrimSpace(pol))
		if err != nil {
			return nil, fmt.Errorf("gateway: room policy %.64q: %w", e, err)
		}
		for _, q := range ps {
			if q.Pattern == p {
				return nil, fmt.Errorf("gateway: room policy %.64q: pattern %q given twice", e, p)
			}
		}
		ps = append(ps, RoomPolicy{Pattern: p, Policy: policy})
	}
	return ps, nil
}

// For is room's policy: that of the longest pattern covering it, else
// rooms.PolicyClose. The registry asks once per room, when it opens.
func (ps RoomPolicies) For(room string) rooms.Policy {
	policy, longest := rooms.PolicyClose, -1
	for _, p := range ps {
		// A prefix is shorter than every room it covers: a room's own name wins.
		if n := len(strings.TrimSuffix(string(p.Pattern), "*")); n > longest && p.Pattern.Match(room) {
			policy, longest = p.Policy, n
		}
	}
	return policy
}

// String lists the entries as --room-policy takes them, comma-separated.
func (ps RoomPolicies) String() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(p.Pattern) + "=" + p.Policy.String())
	}
	return b.String()
}
