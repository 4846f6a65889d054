package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/health"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// Server timeouts: bounded so that slow clients cannot hold connections.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// Environment variables named by listener errors.
const (
	envWebAddr   = config.Prefix + "WEB_ADDR"
	envAdminAddr = config.Prefix + "WEB_ADMIN_ADDR"
)

// Server is the public HTTP listener and, when APP_WEB_ADMIN_ADDR is set,
// the admin listener: both bound by OnStart and shut down gracefully by
// OnStop within the stop timeout (APP_SHUTDOWN_TIMEOUT).
type Server struct {
	public listener
	admin  *listener // nil without APP_WEB_ADMIN_ADDR
	log    *slog.Logger
	down   fx.Shutdowner
	health *health.Handlers
}

// listener is one http.Server and the address it binds.
type listener struct {
	name string // "public" or "admin", in logs
	addr string // configured
	env  string // the variable naming addr, for bind errors
	srv  *http.Server

	mu    sync.Mutex
	bound string
	done  chan struct{}
}

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func newServer(lc fx.Lifecycle, cfg config.Config, h, admin http.Handler, log *slog.Logger, down fx.Shutdowner, hh *health.Handlers) *Server {
	s := &Server{
		public: listener{name: "public", addr: cfg.Web.Addr, env: envWebAddr + " / -addr", srv: newHTTPServer(h, log)},
		log:    log.With("component", "http"),
		down:   down,
		health: hh,
	}
	if cfg.Web.AdminAddr != "" && admin != nil {
		s.admin = &listener{name: "admin", addr: cfg.Web.AdminAddr, env: envAdminAddr, srv: newHTTPServer(admin, log)}
	}
	lc.Append(fx.Hook{OnStart: s.start, OnStop: s.stop})
	return s
}

// Addr is the public listener's bound address once started ("" before).
func (s *Server) Addr() string { return s.public.boundAddr() }

// AdminAddr is the admin listener's bound address once started; "" before,
// or without APP_WEB_ADMIN_ADDR.
func (s *Server) AdminAddr() string {
	if s.admin == nil {
		return ""
	}
	return s.admin.boundAddr()
}

func (l *listener) boundAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bound
}

// start binds both listeners before serving either, so that a bind error
// (naming its variable) fails start-up with nothing left listening.
func (s *Server) start(context.Context) error {
	pub, err := net.Listen("tcp", s.public.addr)
	if err != nil {
		return fmt.Errorf("web: listen on %s (%s): %w", s.public.addr, s.public.env, err)
	}
	var adm net.Listener
	if s.admin != nil {
		if adm, err = net.Listen("tcp", s.admin.addr); err != nil {
			_ = pub.Close()
			return fmt.Errorf("web: admin listener: listen on %s (%s): %w", s.admin.addr, s.admin.env, err)
		}
	}
	if s.admin == nil {
		// Before "listening": whoever waits for that line has this one.
		s.log.Warn(envAdminAddr + " unset: /metrics and the detailed /readyz document are served on the public listener; set it to move them to a private address")
	}
	s.serve(&s.public, pub, "listening")
	if s.admin != nil {
		s.serve(s.admin, adm, "admin listening")
	}
	return nil
}

func (s *Server) serve(l *listener, ln net.Listener, msg string) {
	done := make(chan struct{})
	l.mu.Lock()
	l.bound, l.done = ln.Addr().String(), done
	l.mu.Unlock()
	s.log.Info(msg, "addr", ln.Addr().String())
	go func() {
		defer close(done)
		if err := l.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "listener", l.name, "err", err)
			_ = s.down.Shutdown(fx.ExitCode(1))
		}
	}()
}

// stop turns /readyz to 503, then drains in-flight requests on both
// listeners at once until ctx ends, then closes what is left.
func (s *Server) stop(ctx context.Context) error {
	s.health.Drain()
	ls := []*listener{&s.public}
	if s.admin != nil {
		ls = append(ls, s.admin)
	}
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Go(func() { errs[i] = s.stopOne(ctx, l) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) stopOne(ctx context.Context, l *listener) error {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	err := l.srv.Shutdown(ctx)
	if err != nil {
		s.log.Warn("graceful shutdown incomplete; closing remaining connections", "listener", l.name, "err", err)
		_ = l.srv.Close()
		err = fmt.Errorf("web: %s listener: %w", l.name, err)
	}
	<-done
	return err
}
