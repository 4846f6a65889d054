package ratedenial

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/invalidation"
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
const maxPayload = invalidation.MaxPayload

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

// listener is the Cache's side of its subscription
// (invalidation.Listener).
type listener struct{ c *Cache }

func (l listener) Invalidate(stateKey string) { l.c.Invalidate(stateKey) }
func (l listener) SetLive(live bool)          { l.c.setLive(live) }

// Start starts the subscription when the cache has a client (once; it
// never fails: the subscription retries by itself, package
// internal/invalidation). The cache is live from each session's
// confirmation until it ends; then it is cleared and not live until the
// next one. The ctx argument is unused, for an fx hook.
func (c *Cache) Start(context.Context) error {
	if c.sub != nil {
		c.sub.Start()
	}
	return nil
}

// Close stops the subscription and waits for it. A cache with a client
// then drops its entries and serves none (it would no longer hear a
// reset); calls pass through to the decorated port. It does not close the
// decorated port or the client.
func (c *Cache) Close() {
	if c.sub != nil {
		c.sub.Close()
	}
}
