package replay

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// checkOpen finds out, once, after the log first connects, whether Redis takes
// commands from a client that sends no credentials: its default user is on without
// a password. Anyone who reaches such a Redis can SPUBLISH a doorbell that pods
// deliver as a room's next event, or write room: keys, whatever the gateway's own
// user may do; so the log warns, once. A log with credentials connects as it does,
// without them (a refused HELLO, NOAUTH, means credentials are required); one
// without uses its own client. Either PINGs every node its client knows.
func (l *RedisLog) checkOpen() {
	ctx, cancel := context.WithTimeout(l.life, l.cfg.Timeout)
	defer cancel()
	c := l.client
	if l.cfg.Username != "" || l.cfg.Password != "" {
		anon := l.cfg
		anon.Username, anon.Password = "", ""
		var err error
		if c, err = connectRedis(ctx, anon); err != nil {
			if l.life.Err() != nil {
				return
			}
			if refusesAnonymous(err) {
				l.cfg.Logger.Debug("redis refuses clients without credentials", "addrs", l.cfg.Addrs)
			} else {
				l.cfg.Logger.Debug("could not check whether redis takes clients without credentials", "addrs", l.cfg.Addrs, "err", err)
			}
			return
		}
		defer c.Close()
	}
	var (
		mu   sync.Mutex
		open []string
		wg   sync.WaitGroup
	)
	for addr, n := range c.Nodes() {
		wg.Go(func() {
			if n.Do(ctx, n.B().Ping().Build()).Error() == nil {
				mu.Lock()
				open = append(open, addr)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(open) == 0 {
		l.cfg.Logger.Debug("redis refuses commands from clients without credentials", "addrs", l.cfg.Addrs)
		return
	}
	slices.Sort(open)
	l.cfg.Logger.Warn("redis takes commands from clients without credentials (its default user is on without a password): "+
		"anyone who reaches it can forge doorbells and write room: keys; turn the default user off and give the gateway its own user (deploy/README.md, Redis ACL)",
		"nodes", open)
}

// refusesAnonymous reports whether err is Redis asking for credentials.
func refusesAnonymous(err error) bool {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS")
}
