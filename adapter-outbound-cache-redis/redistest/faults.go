package redistest

import (
	"context"
	"time"
)

// Kill stops the server abruptly (SIGKILL in the process lane). The port
// stays reserved for Restart. A pause in progress ends.
func (s *Server) Kill() {
	s.t.Helper()
	s.must(CapKill)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endPauseLocked(false)
	if err := s.lane.kill(); err != nil {
		s.t.Fatalf("redistest: kill: %v", err)
	}
}

// Restart starts the server again on the same address and configuration,
// and returns once it answers PING (so after any RDB load has finished:
// PING is refused while loading). It kills a server that is still running
// first. Automatic snapshots are off, so the dataset is empty unless the
// test wrote an RDB itself (SAVE), which the process lane loads again from
// its directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.must(CapRestart)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endPauseLocked(false)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.lane.restart(ctx); err != nil {
		s.t.Fatalf("redistest: restart: %v%s", err, s.tail())
	}
}

// Pause freezes the server (SIGSTOP, or docker pause) and resumes it after d
// in the background; it returns at once. Calling Pause while paused moves
// the resume time to d from now. Connections stay open: clients see
// timeouts, not refusals.
func (s *Server) Pause(d time.Duration) {
	s.t.Helper()
	s.must(CapPause)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pauseStop != nil {
		close(s.pauseStop) // the old timer goroutine exits without resuming
	} else if err := s.lane.pause(); err != nil {
		s.t.Fatalf("redistest: pause: %v", err)
	}
	stop := make(chan struct{})
	s.pauseStop = stop
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.pauseStop == stop {
				s.endPauseLocked(true)
			}
		case <-stop:
		}
	}()
}

// Resume ends a pause early. It does nothing when the server is not paused.
func (s *Server) Resume() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endPauseLocked(true)
}

// endPauseLocked ends a pause in progress, thawing the server if thaw.
func (s *Server) endPauseLocked(thaw bool) {
	if s.pauseStop == nil {
		return
	}
	close(s.pauseStop)
	s.pauseStop = nil
	if err := s.lane.resume(); err != nil && thaw {
		s.t.Errorf("redistest: resume: %v", err)
	}
}
