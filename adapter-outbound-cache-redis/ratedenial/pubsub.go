package ratedenial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Channel is the Redis pub/sub channel invalidations travel on: each
// message's payload is one state key (redisrate.StateKey) whose state was
// reset. The payload holds no subject: the key is what Redis already
// stores. Each subscribed cache also subscribes to a heartbeat channel of
// its own, Channel + ":hb:" + a random instance ID, and publishes its
// heartbeats there (no other instance receives them). The service's ACL
// user needs "&" + Channel + "*", +subscribe and +publish; tlbctl's
// "&" + Channel and +publish (docs/operations.md).
const Channel = "tlb-denial-cache-invalidate"

// HeartbeatChannelPrefix starts every heartbeat channel.
const HeartbeatChannelPrefix = Channel + ":hb:"

// maxPayload bounds an invalidation's payload: a state key is at most a
// few hundred bytes.
const maxPayload = 1024

// Publish announces that the state under stateKey was reset, so that
// every cache subscribed to Channel drops its entry for it. It returns
// how many subscribers received it (in Redis Cluster, those of the node
// c reached; PUBLISH reaches every node's subscribers).
func Publish(ctx context.Context, c redis.Cmdable, stateKey string) (int64, error) {
	if stateKey == "" || len(stateKey) > maxPayload {
		return 0, fmt.Errorf("ratedenial: publish: state key of %d bytes, want 1..%d", len(stateKey), maxPayload)
	}
	n, err := c.Publish(ctx, Channel, stateKey).Result()
	if err != nil {
		return 0, fmt.Errorf("ratedenial: PUBLISH %s: %w", Channel, err)
	}
	return n, nil
}

// subscribe keeps a subscription to Channel until Close: each session
// subscribes, and the cache is live from its subscription's confirmation
// until the session ends (an error, or its own heartbeat not received
// within a heartbeat); then the cache is cleared and not live until the next
// session confirms, after a backoff (100ms doubling to 5s, reset by a
// confirmed session).
func (c *Cache) subscribe(client redis.UniversalClient, heartbeat time.Duration) {
	defer c.wg.Done()
	backoff := 100 * time.Millisecond
	reported := false // a failure was logged: further failed attempts are not
	for {
		confirmed, err := c.session(client, heartbeat)
		if confirmed {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-c.stop:
			return
		default:
		}
		c.setLive(false)
		if c.log != nil && (confirmed || !reported) {
			c.log.Warn("denial cache: invalidation subscription lost; cached denials cleared and none served until it is back", "channel", Channel, "err", err)
			reported = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session runs one subscription until it fails or Close closes it;
// confirmed reports whether the server confirmed it (the cache was live).
//
// Liveness is checked end to end: the session subscribes to Channel and
// to this cache's heartbeat channel on one connection, and once a
// heartbeat publishes a numbered heartbeat through the client (as tlbctl
// publishes a reset: to the primary the client writes to); the next
// heartbeat must find it received. A dead connection, a subscription left
// on a demoted Sentinel primary (go-redis's failover client does not move
// a subscription) or a cluster bus that does not carry messages all end
// the session within two heartbeats.
func (c *Cache) session(client redis.UniversalClient, heartbeat time.Duration) (confirmed bool, err error) {
	ctx := context.Background()
	hbChannel := HeartbeatChannelPrefix + c.instance
	ps := client.Subscribe(ctx, Channel, hbChannel)
	c.psMu.Lock()
	select {
	case <-c.stop:
		c.psMu.Unlock()
		_ = ps.Close()
		return false, nil
	default:
	}
	c.closer = ps.Close
	c.psMu.Unlock()
	defer func() {
		c.psMu.Lock()
		c.closer = nil
		c.psMu.Unlock()
		_ = ps.Close()
	}()
	var sent, got uint64
	subscribed := map[string]bool{}
	next := time.Now().Add(2 * heartbeat) // the confirmations' deadline
	for {
		if wait := time.Until(next); wait <= 0 {
			switch {
			case !confirmed:
				return false, fmt.Errorf("SUBSCRIBE %s %s not confirmed within %v", Channel, hbChannel, 2*heartbeat)
			case got < sent:
				return true, fmt.Errorf("heartbeat %d not received within %v", sent, heartbeat)
			}
			sent++
			pctx, cancel := context.WithTimeout(ctx, heartbeat)
			err := client.Publish(pctx, hbChannel, strconv.FormatUint(sent, 10)).Err()
			cancel()
			if err != nil {
				return true, fmt.Errorf("heartbeat: PUBLISH: %w", err)
			}
			next = time.Now().Add(heartbeat)
			continue
		}
		msg, err := ps.ReceiveTimeout(ctx, time.Until(next))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return confirmed, err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" || (m.Channel != Channel && m.Channel != hbChannel) {
				return confirmed, fmt.Errorf("unexpected %s of %q", m.Kind, m.Channel)
			}
			subscribed[m.Channel] = true
			if !confirmed && subscribed[Channel] && subscribed[hbChannel] {
				confirmed = true
				next = time.Now() // the first heartbeat at once
				c.setLive(true)
				if c.log != nil {
					c.log.Info("denial cache: subscribed to invalidations", "channel", Channel)
				}
			}
		case *redis.Message:
			switch {
			case m.Channel == hbChannel:
				if n, err := strconv.ParseUint(m.Payload, 10, 64); err == nil && n > got {
					got = n
				}
			case m.Channel == Channel && len(m.Payload) <= maxPayload:
				c.Invalidate(m.Payload)
			}
		case *redis.Pong:
		}
	}
}

// Start starts the subscription when the cache has a client (once; it
// never fails: the subscription retries by itself). The ctx argument is
// unused, for an fx hook.
func (c *Cache) Start(context.Context) error {
	c.startOnce.Do(func() {
		select {
		case <-c.stop:
			return
		default:
		}
		if c.client != nil {
			c.wg.Add(1)
			go c.subscribe(c.client, c.heartbeat)
		}
	})
	return nil
}

// Close stops the subscription and waits for it. A cache with a client
// then drops its entries and serves none (it would no longer hear a
// reset); calls pass through to the decorated port. It does not close the
// decorated port or the client.
func (c *Cache) Close() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.psMu.Lock()
		if c.closer != nil {
			_ = c.closer()
		}
		c.psMu.Unlock()
	})
	c.wg.Wait()
	if c.client != nil {
		c.setLive(false)
	}
}
