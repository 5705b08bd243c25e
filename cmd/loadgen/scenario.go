package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Named scenarios (-scenario). Each is a set of flag defaults; a flag given on the
// command line wins over its scenario's default. Without -scenario the plain flag
// defaults apply, as before scenarios existed.
const (
	scenarioFanout       = "fanout"        // many subscribers on one room
	scenarioManyRooms    = "many-rooms"    // many small rooms, publishes spread over them
	scenarioStorm        = "storm"         // every stream ends at once and resumes
	scenarioRollingDrain = "rolling-drain" // pods drained one at a time under load
	scenarioSoak         = "soak"          // a long steady run with periodic report lines
	scenarioChaos        = "chaos"         // its own fleet, faults injected on a seeded schedule
	scenarioRebalance    = "rebalance"     // an empty pod joins loaded ones, which shed to it
)

// Ways the storm scenario ends every stream.
const (
	stormShed   = "shed"   // the server: POST <admin>/admin/shed?count=N on every admin URL
	stormClient = "client" // the subscribers close their connections at once
)

// scenarioDefaults are the flag defaults of each scenario, by flag name.
var scenarioDefaults = map[string]map[string]string{
	scenarioFanout: {"subs": "1000", "rooms": "1", "rate": "100"},
	// Two members per room: -subs defaults to twice -rooms (see applyScenario).
	scenarioManyRooms: {"rooms": "10000", "rate": "1000", "connect-rate": "5000"},
	// The reconnects follow at once: the server's retry: hint is capped at
	// minRetry, the delay a subscriber waits before reconnecting anyway.
	scenarioStorm:        {"subs": "1000", "rooms": "1", "rate": "50", "duration": "30s", "retry-cap": minRetry.String()},
	scenarioRollingDrain: {"subs": "1000", "rooms": "100", "rate": "200", "duration": "1m"},
	scenarioSoak:         {"subs": "100", "rooms": "10", "rate": "50", "duration": "1h", "report-every": "1m"},
	// 48 single-room members (4 a room, one of them over WebSocket) and 4
	// multiplexed streams of 3 rooms.
	scenarioChaos: {"subs": "60", "rooms": "12", "rate": "100", "ws-share": "0.25", "mux-streams": "4",
		"mux-rooms": "3", "duration": "3m", "settle": "30s", "retry-cap": "1s"},
	// The window lasts until the pods are balanced (within -rebalance-wait).
	scenarioRebalance: {"subs": "3000", "rooms": "300", "rate": "100", "duration": "10s"},
}

// scenarioNames returns the scenario names, sorted.
func scenarioNames() []string { return slices.Sorted(maps.Keys(scenarioDefaults)) }

// applyScenario sets the scenario's defaults on the flags the command line left
// alone, after parsing.
func applyScenario(fs *flag.FlagSet, c *Config, admins *stringList) error {
	if c.Scenario == "" {
		return nil
	}
	defaults, ok := scenarioDefaults[c.Scenario]
	if !ok {
		return fmt.Errorf("-scenario %q: want one of %v", c.Scenario, scenarioNames())
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range slices.Sorted(maps.Keys(defaults)) {
		if given[name] {
			continue
		}
		if err := fs.Set(name, defaults[name]); err != nil {
			return fmt.Errorf("-scenario %s: default -%s: %w", c.Scenario, name, err)
		}
	}
	switch c.Scenario {
	case scenarioManyRooms:
		if !given["subs"] {
			if err := fs.Set("subs", strconv.Itoa(2*c.Rooms)); err != nil {
				return fmt.Errorf("-scenario %s: default -subs: %w", c.Scenario, err)
			}
		}
	case scenarioChaos:
		if given["url"] || given["admin-url"] {
			return errors.New("-scenario chaos runs its own fleet: no -url or -admin-url")
		}
	case scenarioStorm:
		if c.StormVia == "" {
			c.StormVia = stormClient
			if len(admins.values()) > 0 {
				c.StormVia = stormShed
			}
		}
		if c.StormAt == 0 {
			c.StormAt = c.Duration / 3
		}
	}
	return nil
}

// validateScenario rejects scenario settings that cannot run.
func (c *Config) validateScenario() error {
	var errs []error
	if len(c.AdminURLs) > len(c.URLs) {
		errs = append(errs, errors.New("more -admin-url than -url: the i-th -admin-url belongs to the i-th -url"))
	}
	switch c.Bar {
	case barAuto, barOn, barOff:
	default:
		errs = append(errs, fmt.Errorf("-bar %q: want %s, %s or %s", c.Bar, barAuto, barOn, barOff))
	}
	if c.ReportEvery < 0 || c.StormAt < 0 || c.DrainWait <= 0 {
		errs = append(errs, errors.New("-report-every and -storm-at must be >= 0, -drain-wait > 0"))
	}
	if c.PlotDir != "" && c.Idle {
		errs = append(errs, errors.New("-plot draws the measured window's timeline: not with -idle"))
	}
	if len(c.URLs) > 1 && c.Protocol == protocolCentrifugo {
		errs = append(errs, errors.New("several -url values: -protocol roomcast only"))
	}
	if c.Idle && c.Scenario != "" {
		errs = append(errs, errors.New("-idle holds connections only: not with -scenario"))
	}
	switch c.Scenario {
	case scenarioStorm:
		switch c.StormVia {
		case stormShed:
			if len(c.AdminURLs) == 0 {
				errs = append(errs, errors.New("-storm-via shed needs -admin-url"))
			}
		case stormClient:
		default:
			errs = append(errs, fmt.Errorf("-storm-via %q: want %s or %s", c.StormVia, stormShed, stormClient))
		}
		if c.StormAt >= c.Duration {
			errs = append(errs, errors.New("-storm-at must fall inside -duration"))
		}
	case scenarioRollingDrain:
		switch {
		case len(c.URLs) < 2:
			errs = append(errs, errors.New("rolling-drain needs at least two -url values, one per pod"))
		case c.DrainCmd == "" && len(c.AdminURLs) == 0:
			errs = append(errs, errors.New("rolling-drain drains the pods given by -admin-url (or runs -drain-cmd per pod): give one"))
		case c.DrainCmd == "" && len(c.AdminURLs) >= len(c.URLs):
			errs = append(errs, errors.New("rolling-drain through the admin API must leave a pod undrained: give fewer -admin-url than -url"))
		}
	}
	if c.Scenario == scenarioChaos {
		errs = append(errs, c.validateChaos())
	}
	if c.Scenario == scenarioRebalance && len(c.URLs) < 2 {
		errs = append(errs, errors.New("rebalance needs at least two -url values: the streams start on all but the last, which joins empty"))
	}
	if c.RebalanceWait <= 0 {
		errs = append(errs, errors.New("-rebalance-wait must be > 0"))
	}
	if c.StormVia != "" && c.Scenario != scenarioStorm {
		errs = append(errs, errors.New("-storm-via belongs to -scenario storm"))
	}
	return errors.Join(errs...)
}
