package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/roomcast/roomcast/drain"
	"github.com/roomcast/roomcast/replay"
)

// Rebalancing without a deploy. Every pod records its open connections for the
// fleet (replay.FleetStreams) once an Interval. With Rebalance.On, a pod that holds
// more than the fleet's mean × (1 + Margin) sheds a few connections each Interval,
// at most Rate of its connections a minute, never while it drains, never below the
// mean, and stops once it is within the margin. It sheds first the connections
// whose rooms are not at home here (another pod holds more of their members: under
// a router that hashes the room, they reconnect to the room's pod), then any.
// A shed is the one of POST /admin/shed: reason shed, a final retry: hint, and the
// client resumes by id on whichever pod the router picks.

// Rebalance configures rebalancing (Config.Rebalance). Every zero value means "the
// default".
type Rebalance struct {
	// On turns rebalancing on; off, the pod still records its connections.
	On bool
	// Margin is how far over the fleet's mean, as a fraction of it, a pod may be
	// before it sheds (default 0.1; 0 < Margin ≤ 10).
	Margin float64
	// Rate bounds the connections a pod sheds to rebalance, as a fraction of its
	// open connections per minute (default 0.02; 0 < Rate ≤ 10), and at least one
	// a minute; spread over the minute's rounds.
	Rate float64
	// Interval is how often the pod records its connections and compares itself
	// with the fleet (default 2s, as --occupancy-interval). A record lives three
	// intervals.
	Interval time.Duration
}

func (r *Rebalance) fill() error {
	if r.Margin == 0 {
		r.Margin = 0.1
	}
	if r.Rate == 0 {
		r.Rate = 0.02
	}
	if r.Interval == 0 {
		r.Interval = 2 * time.Second
	}
	if !(r.Margin > 0 && r.Margin <= 10) || !(r.Rate > 0 && r.Rate <= 10) || r.Interval < time.Millisecond {
		return fmt.Errorf("gateway: rebalance margin %v and rate %v must be in (0, 10], interval %s at least 1ms",
			r.Margin, r.Rate, r.Interval)
	}
	return nil
}

// rebalanceExcess returns how many connections a pod holding local ones should shed
// to come within margin of the fleet's mean, given the other live pods' counts:
// none while it is within the margin, never so many that it falls below the mean.
func rebalanceExcess(local int, others []int, margin float64) (excess int, mean float64) {
	total := local
	for _, n := range others {
		total += n
	}
	mean = float64(total) / float64(len(others)+1)
	if len(others) == 0 || float64(local) <= mean*(1+margin) {
		return 0, mean
	}
	toMargin := local - int(math.Floor(mean*(1+margin)))
	toMean := local - int(math.Ceil(mean))
	return max(0, min(toMargin, toMean)), mean
}

// shedBudget is the rate bound of rebalancing sheds: a token bucket that fills at
// rate connections a minute and holds one round's worth and one more: no burst
// beyond a round's share, and a share below one adds up over the rounds.
type shedBudget struct {
	tokens float64
	last   time.Time
}

// take adds what accrued since the last call at perMinute and returns how many
// whole sheds it allows now, up to want, taking them.
func (b *shedBudget) take(now time.Time, perMinute float64, round time.Duration, want int) int {
	if !b.last.IsZero() {
		b.tokens += perMinute * now.Sub(b.last).Minutes()
	}
	b.last = now
	b.tokens = min(b.tokens, perMinute*round.Minutes()+1)
	n := min(want, int(b.tokens+1e-9)) // sums of fractions: 0.999… is 1
	b.tokens -= float64(n)
	return max(n, 0)
}

// reset empties the bucket: a pod that has nothing to shed saves up nothing.
func (b *shedBudget) reset(now time.Time) { b.tokens, b.last = 0, now }

// Rebalancing rounds' outcomes, the label of roomcast_rebalance_rounds_total.
const (
	roundBalanced = "balanced" // within the margin (or off, or alone)
	roundShed     = "shed"     // over it: shed some
	roundWait     = "wait"     // over it, the rate bound allows none yet
	roundDraining = "draining" // the pod drains: no rebalancing
	roundUnknown  = "unknown"  // the fleet's records could not be read or written
)

type rebalanceMetrics struct {
	shed   prometheus.Counter
	rounds *prometheus.CounterVec
}

func newRebalanceMetrics(reg prometheus.Registerer) (*rebalanceMetrics, error) {
	m := &rebalanceMetrics{
		shed: prometheus.NewCounter(prometheus.CounterOpts{Name: "roomcast_rebalance_shed_total",
			Help: "Connections the pod shed to rebalance the fleet (--rebalance); each is also a closed stream with reason shed."}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roomcast_rebalance_rounds_total",
			Help: "Rounds of recording the pod's connections and comparing them with the fleet's, by outcome: balanced, shed, wait (the rate bound), draining, unknown (the store failed)."},
			[]string{"outcome"}),
	}
	for _, o := range []string{roundBalanced, roundShed, roundWait, roundDraining, roundUnknown} {
		m.rounds.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.shed, m.rounds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// maxHomeRooms bounds the rooms whose occupancy one round reads to find
// connections that are not at home.
const maxHomeRooms = 128

// Rebalance records the pod's open connections for the fleet every
// Rebalance.Interval and, with Rebalance.On, rebalances (see Rebalance) until ctx
// ends; then it forgets the pod's record. It returns nil then, and at once when the
// log keeps no fleet records.
func (s *Server) Rebalance(ctx context.Context) error {
	if s.streams == nil {
		return nil
	}
	rb := s.cfg.Rebalance
	t := time.NewTicker(rb.Interval)
	defer t.Stop()
	var budget shedBudget
	for {
		s.rebalanceRound(ctx, &budget, time.Now())
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), occupancyTimeout)
			defer cancel()
			if err := s.streams.ForgetStreams(fctx, s.podID()); err != nil && !errors.Is(err, replay.ErrClosed) {
				s.cfg.Logger.Debug("rebalance: forgetting the pod's connections record", "err", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// rebalanceRound records the pod's connections and, with rebalancing on, compares
// them with the fleet's and sheds what the margin and the budget say.
func (s *Server) rebalanceRound(ctx context.Context, budget *shedBudget, now time.Time) {
	rb, pod := s.cfg.Rebalance, s.podID()
	local := s.conns.Len()
	ctx, cancel := context.WithTimeout(ctx, occupancyTimeout)
	defer cancel()
	outcome := func(o string) { s.rebalanceM.rounds.WithLabelValues(o).Inc() }
	if err := s.streams.SetStreams(ctx, pod, local, 3*rb.Interval); err != nil {
		s.cfg.Logger.Debug("rebalance: recording the pod's connections", "err", err)
		outcome(roundUnknown)
		return
	}
	if !rb.On {
		outcome(roundBalanced)
		return
	}
	if s.drain.State() != drain.StateReady {
		budget.reset(now)
		outcome(roundDraining)
		return
	}
	recs, err := s.streams.Streams(ctx)
	if err != nil {
		s.cfg.Logger.Debug("rebalance: reading the fleet's connections", "err", err)
		outcome(roundUnknown)
		return
	}
	others := make([]int, 0, len(recs))
	for _, r := range recs {
		if r.Pod != pod {
			others = append(others, r.Streams)
		}
	}
	excess, mean := rebalanceExcess(local, others, rb.Margin)
	if excess == 0 {
		budget.reset(now)
		outcome(roundBalanced)
		return
	}
	n := budget.take(now, max(1, rb.Rate*float64(local)), rb.Interval, excess)
	if n == 0 {
		outcome(roundWait)
		return
	}
	closed, away := s.conns.shedAway(n, func(rooms []string) map[string]bool { return s.awayRooms(ctx, pod, rooms) })
	s.rebalanceM.shed.Add(float64(closed))
	outcome(roundShed)
	s.cfg.Logger.Info("rebalance: shed connections", "pod", pod, "streams", local, "fleet_mean", math.Round(mean*10)/10,
		"pods", len(others)+1, "excess", excess, "shed", closed, "away_from_home", away)
}

// awayRooms returns, of rooms, those another pod of the fleet holds more members
// of than this pod, by the occupancy records. A room whose records cannot be read
// counts as at home.
func (s *Server) awayRooms(ctx context.Context, pod string, rooms []string) map[string]bool {
	away := map[string]bool{}
	if s.occupancy == nil {
		return away
	}
	for _, room := range rooms {
		recs, err := s.occupancy.Occupancy(ctx, room)
		if err != nil {
			s.cfg.Logger.Debug("rebalance: reading a room's occupancy", "room", room, "err", err)
			return away
		}
		here, most := 0, 0
		for _, r := range recs {
			if r.Pod == pod {
				here = r.Members
			} else {
				most = max(most, r.Members)
			}
		}
		if most > here {
			away[room] = true
		}
	}
	return away
}
