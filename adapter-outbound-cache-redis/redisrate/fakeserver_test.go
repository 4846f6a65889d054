package redisrate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// respAction is what the fake server does with one command.
type respAction struct {
	// reply is written verbatim (raw RESP) unless empty.
	reply string
	// close closes the connection after writing reply.
	close bool
	// hang never answers; the connection stays open until the server stops.
	hang bool
	// delay waits before answering.
	delay time.Duration
	// gate, when set, is waited for (closed) before answering.
	gate <-chan struct{}
}

// respServer is a fake RESP endpoint on 127.0.0.1 for driving a real
// go-redis client into shapes and failures a real server will not produce.
// By default it refuses HELLO (go-redis then falls back to RESP2), answers
// PING with PONG and every other command with handler.
type respServer struct {
	t       testing.TB
	ln      net.Listener
	handler func(args []string) respAction
	// onAccept, if set, runs for each new connection before anything is
	// read; returning false closes the connection at once.
	onAccept func(c net.Conn) bool
	// hello and ping, if set, replace the default answers.
	hello, ping *respAction

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	commands []string // lowercase command names, in arrival order
	wg       sync.WaitGroup
	stopping bool
}

// startRESP starts the server; opts adjust it before it accepts anything.
func startRESP(t testing.TB, handler func(args []string) respAction, opts ...func(*respServer)) *respServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake resp server: listen: %v", err)
	}
	s := &respServer{t: t, ln: ln, handler: handler, conns: map[net.Conn]struct{}{}}
	for _, o := range opts {
		o(s)
	}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.stop)
	return s
}

func (s *respServer) Addr() string { return s.ln.Addr().String() }

// Commands returns the command names received so far.
func (s *respServer) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// Count returns how many times name was received.
func (s *respServer) Count(name string) int {
	n := 0
	for _, c := range s.Commands() {
		if c == name {
			n++
		}
	}
	return n
}

func (s *respServer) stop() {
	s.mu.Lock()
	s.stopping = true
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	_ = s.ln.Close()
	s.wg.Wait()
}

func (s *respServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *respServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		_ = c.Close()
	}()
	if s.onAccept != nil && !s.onAccept(c) {
		return
	}
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		name := strings.ToLower(args[0])
		s.mu.Lock()
		s.commands = append(s.commands, name)
		s.mu.Unlock()
		var a respAction
		switch {
		case name == "hello" && s.hello != nil:
			a = *s.hello
		case name == "hello":
			a = respAction{reply: "-ERR unknown command 'HELLO'\r\n"}
		case name == "ping" && s.ping != nil:
			a = *s.ping
		case name == "ping":
			a = respAction{reply: "+PONG\r\n"}
		default:
			a = s.handler(args)
		}
		if a.hang {
			_, _ = io.Copy(io.Discard, r) // until the client or the server closes
			return
		}
		if a.delay > 0 {
			time.Sleep(a.delay)
		}
		if a.gate != nil {
			<-a.gate
		}
		if a.reply != "" {
			if _, err := io.WriteString(c, a.reply); err != nil {
				return
			}
		}
		if a.close {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[0] != '*' {
		return nil, fmt.Errorf("want an array, got %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 1 || n > 1<<10 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		h, err := readLine(r)
		if err != nil {
			return nil, err
		}
		if len(h) < 2 || h[0] != '$' {
			return nil, fmt.Errorf("want a bulk string, got %q", h)
		}
		size, err := strconv.Atoi(h[1:])
		if err != nil || size < 0 || size > 1<<20 {
			return nil, fmt.Errorf("bad bulk length %q", h)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", errors.New("line without CRLF")
	}
	return line[:len(line)-2], nil
}

// respInts renders a RESP2 array of integers.
func respInts(v ...int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(v))
	for _, n := range v {
		fmt.Fprintf(&b, ":%d\r\n", n)
	}
	return b.String()
}
