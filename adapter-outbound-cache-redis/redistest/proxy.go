package redistest

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LossMode says what a Proxy does to the reply of the program call it has
// been armed for (Proxy.LoseNextReply).
type LossMode int

const (
	// LoseAndClose forwards the call to the server, drops its reply and
	// closes both sides of that connection at once: the client sees the
	// connection lost after it wrote (Indeterminate{connection_lost}).
	LoseAndClose LossMode = iota + 1
	// LoseAndHold forwards the call, drops its reply and keeps the
	// connection open without a byte more: the client times out
	// (Indeterminate{timeout}). The connection is closed with the proxy.
	LoseAndHold
)

// Proxy is a TCP proxy on a free loopback port in front of one upstream
// address, with the faults a lost reply and an outage need: Refuse (the
// port refuses connections and every open one is closed), Accept (it
// serves again on the same port) and LoseNextReply (the reply of the next
// program call is lost). It is the test's own: it forwards only to the
// upstream it was given, and t.Cleanup closes it and every connection.
type Proxy struct {
	addr     string
	upstream string

	mu      sync.Mutex
	ln      net.Listener // nil while refusing
	conns   map[*proxyPair]struct{}
	closed  bool
	wg      sync.WaitGroup
	armed   atomic.Int32 // a LossMode, 0: none
	needle  atomic.Pointer[[]byte]
	lost    atomic.Int64 // replies lost so far
	started atomic.Int64 // connections accepted so far
}

// proxyPair is one client connection and its upstream connection.
type proxyPair struct {
	client, server net.Conn
	// lose is the LossMode this pair was doomed with (0: forward).
	lose atomic.Int32
}

// StartProxy starts a Proxy in front of upstream (a loopback address the
// test started) and closes it at t.Cleanup.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{addr: ln.Addr().String(), upstream: upstream, conns: map[*proxyPair]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address (the same across Refuse and Accept).
func (p *Proxy) Addr() string { return p.addr }

// Lost reports how many replies the proxy has lost (LoseNextReply).
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// Accepted reports how many connections the proxy has accepted.
func (p *Proxy) Accepted() int64 { return p.started.Load() }

// Refuse closes the listener (a new connection is refused) and every open
// connection: the server is gone as far as a client can tell.
func (p *Proxy) Refuse() { p.refuse(true) }

// RefuseNew closes the listener only: a new connection is refused, the
// open ones go on.
func (p *Proxy) RefuseNew() { p.refuse(false) }

func (p *Proxy) refuse(closeOpen bool) {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	pairs := p.pairsLocked()
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	if !closeOpen {
		return
	}
	for _, c := range pairs {
		c.close()
	}
}

// Accept serves on the proxy's address again after Refuse. It retries the
// listen for up to 5 s (the port was just released).
func (p *Proxy) Accept() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errProxyClosed
	}
	if p.ln != nil {
		return nil
	}
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serveLocked(ln)
			return nil
		}
	}
	return err
}

// LoseNextReply arms the proxy: the next program call (EVALSHA or EVAL) a
// client sends on any connection is forwarded and its reply lost as mode
// says. Calls after that one are forwarded as usual.
func (p *Proxy) LoseNextReply(mode LossMode) { p.LoseNextReplyTo(mode, "") }

// LoseNextReplyTo is LoseNextReply for the next program call whose
// command carries needle (a program's SHA1, say); "" matches any.
func (p *Proxy) LoseNextReplyTo(mode LossMode, needle string) {
	b := []byte(needle)
	p.needle.Store(&b)
	p.armed.Store(int32(mode))
}

// Disarm takes back a LoseNextReply that has not met a call yet.
func (p *Proxy) Disarm() { p.armed.Store(0) }

// Close stops the proxy and closes every connection; it waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.Refuse()
	p.wg.Wait()
}

var errProxyClosed = errors.New("redistest: proxy closed")

func (p *Proxy) pairsLocked() []*proxyPair {
	out := make([]*proxyPair, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serveLocked(ln)
}

func (p *Proxy) serveLocked(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Refuse or Close
			}
			p.pair(c)
		}
	}()
}

// pair dials the upstream for client c and starts both copy loops; a
// failed dial closes c.
func (p *Proxy) pair(c net.Conn) {
	s, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	pp := &proxyPair{client: c, server: s}
	p.mu.Lock()
	if p.closed || p.ln == nil {
		p.mu.Unlock()
		pp.close()
		return
	}
	p.conns[pp] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	p.started.Add(1)
	go p.upstreamCopy(pp)
	go p.downstreamCopy(pp)
}

// upstreamCopy forwards client to server; an armed proxy dooms the pair
// whose chunk carries the next program call.
func (p *Proxy) upstreamCopy(pp *proxyPair) {
	defer p.wg.Done()
	defer p.drop(pp)
	buf := make([]byte, 32<<10)
	for {
		n, err := pp.client.Read(buf)
		if n > 0 {
			if p.armed.Load() != 0 && isProgramCall(buf[:n]) && bytes.Contains(buf[:n], *p.needle.Load()) {
				if mode := p.armed.Swap(0); mode != 0 {
					pp.lose.Store(mode)
				}
			}
			if _, werr := pp.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// downstreamCopy forwards server to client unless the pair is doomed:
// then the reply is dropped and the pair closed (LoseAndClose) or held.
func (p *Proxy) downstreamCopy(pp *proxyPair) {
	defer p.wg.Done()
	defer p.drop(pp)
	buf := make([]byte, 32<<10)
	for {
		n, err := pp.server.Read(buf)
		if n > 0 {
			switch LossMode(pp.lose.Load()) {
			case LoseAndClose:
				p.lost.Add(1)
				return // the deferred drop closes both sides at once
			case LoseAndHold:
				p.lost.Add(1)
				holdUntilClosed(pp.server)
				return
			}
			if _, werr := pp.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// holdUntilClosed discards what c sends until it is closed (by the proxy's
// Close, Refuse, or the client giving up on its side).
func holdUntilClosed(c net.Conn) {
	buf := make([]byte, 4<<10)
	for {
		if _, err := c.Read(buf); err != nil {
			return
		}
	}
}

func (p *Proxy) drop(pp *proxyPair) {
	pp.close()
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
}

func (pp *proxyPair) close() {
	_ = pp.client.Close()
	_ = pp.server.Close()
}

// isProgramCall reports whether a RESP chunk holds an EVALSHA or EVAL
// command (the bulk string naming it, in any case).
func isProgramCall(b []byte) bool {
	u := bytes.ToUpper(b)
	return bytes.Contains(u, []byte("\r\nEVALSHA\r\n")) || bytes.Contains(u, []byte("\r\nEVAL\r\n"))
}
