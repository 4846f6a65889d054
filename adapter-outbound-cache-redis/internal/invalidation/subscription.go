package invalidation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxPayload bounds a payload a listener is told: a key is at most a few
// hundred bytes; a longer message is ignored.
const MaxPayload = 1024

// maxBackoff caps the wait between two subscription attempts.
const maxBackoff = 5 * time.Second

// Listener receives what a Subscription hears. Its methods are called from
// the subscription's goroutine, one at a time, and must not block.
type Listener interface {
	// Invalidate is told each payload published on the channel.
	Invalidate(payload string)
	// SetLive is told true when a session is confirmed (both channels
	// subscribed) and false when it ends: outside a session the listener
	// may miss payloads, so it must not trust what it cached before (the
	// denial cache clears and serves nothing; the plan cache expires its
	// entries).
	SetLive(live bool)
}

// Subscription keeps one subscription to a channel until Close (see the
// package doc). Build it with New.
type Subscription struct {
	client    redis.UniversalClient
	channel   string
	hbChannel string
	heartbeat time.Duration
	name      string
	log       *slog.Logger
	l         Listener

	startOnce sync.Once
	stop      chan struct{}
	stopOnce  sync.Once
	wg        sync.WaitGroup
	mu        sync.Mutex
	closer    func() error // closes the session in use
}

// New returns a subscription of l to channel through client, with
// heartbeats every heartbeat on channel + ":hb:" + a random instance ID
// (no other subscription receives them). name starts its log lines (one per
// change of the subscription, never per message; log may be nil). It
// starts nothing (Start).
func New(client redis.UniversalClient, channel string, heartbeat time.Duration, name string, log *slog.Logger, l Listener) *Subscription {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return &Subscription{
		client: client, channel: channel, hbChannel: HeartbeatChannel(channel, hex.EncodeToString(b)),
		heartbeat: heartbeat, name: name, log: log, l: l, stop: make(chan struct{}),
	}
}

// HeartbeatChannel is the heartbeat channel of instance on channel.
func HeartbeatChannel(channel, instance string) string { return channel + ":hb:" + instance }

// Start starts the subscription's goroutine (once; it retries by itself
// until Close).
func (s *Subscription) Start() {
	s.startOnce.Do(func() {
		select {
		case <-s.stop:
			return
		default:
		}
		s.wg.Add(1)
		go s.run()
	})
}

// Close stops the subscription and waits for its goroutine; the listener
// is told SetLive(false) last.
func (s *Subscription) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.mu.Lock()
		if s.closer != nil {
			_ = s.closer()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
	s.l.SetLive(false)
}

// run keeps sessions until Close: after a session ends the listener is
// told it is not live, and the next attempt waits a backoff (100ms
// doubling to 5s, reset by a confirmed session).
func (s *Subscription) run() {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	reported := false // a failure was logged: further failed attempts are not
	for {
		confirmed, err := s.session()
		if confirmed {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-s.stop:
			return
		default:
		}
		s.l.SetLive(false)
		if s.log != nil && (confirmed || !reported) {
			s.log.Warn(s.name+": invalidation subscription lost; cleared and nothing served from it until it is back", "channel", s.channel, "err", err)
			reported = true
		}
		t := time.NewTimer(backoff)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// session runs one subscription until it fails or Close closes it;
// confirmed reports whether the server confirmed it (the listener was
// live).
func (s *Subscription) session() (confirmed bool, err error) {
	ctx := context.Background()
	ps := s.client.Subscribe(ctx, s.channel, s.hbChannel)
	s.mu.Lock()
	select {
	case <-s.stop:
		s.mu.Unlock()
		_ = ps.Close()
		return false, nil
	default:
	}
	s.closer = ps.Close
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.closer = nil
		s.mu.Unlock()
		_ = ps.Close()
	}()
	var sent, got uint64
	subscribed := map[string]bool{}
	next := time.Now().Add(2 * s.heartbeat) // the confirmations' deadline
	for {
		if wait := time.Until(next); wait <= 0 {
			switch {
			case !confirmed:
				return false, fmt.Errorf("SUBSCRIBE %s %s not confirmed within %v", s.channel, s.hbChannel, 2*s.heartbeat)
			case got < sent:
				return true, fmt.Errorf("heartbeat %d not received within %v", sent, s.heartbeat)
			}
			sent++
			pctx, cancel := context.WithTimeout(ctx, s.heartbeat)
			err := s.client.Publish(pctx, s.hbChannel, strconv.FormatUint(sent, 10)).Err()
			cancel()
			if err != nil {
				return true, fmt.Errorf("heartbeat: PUBLISH: %w", err)
			}
			next = time.Now().Add(s.heartbeat)
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
			if m.Kind != "subscribe" || (m.Channel != s.channel && m.Channel != s.hbChannel) {
				return confirmed, fmt.Errorf("unexpected %s of %q", m.Kind, m.Channel)
			}
			subscribed[m.Channel] = true
			if !confirmed && subscribed[s.channel] && subscribed[s.hbChannel] {
				confirmed = true
				next = time.Now() // the first heartbeat at once
				s.l.SetLive(true)
				if s.log != nil {
					s.log.Info(s.name+": subscribed to invalidations", "channel", s.channel)
				}
			}
		case *redis.Message:
			switch {
			case m.Channel == s.hbChannel:
				if n, err := strconv.ParseUint(m.Payload, 10, 64); err == nil && n > got {
					got = n
				}
			case m.Channel == s.channel && len(m.Payload) <= MaxPayload:
				s.l.Invalidate(m.Payload)
			}
		case *redis.Pong:
		}
	}
}
