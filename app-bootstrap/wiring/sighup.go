package wiring

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/fx"
)

// onSIGHUP runs handle on lc's application goroutine of its own for every
// SIGHUP between start and stop; stop waits for it to return, at most
// until stop's context ends.
func onSIGHUP(lc fx.Lifecycle, handle func()) {
	hup := make(chan os.Signal, 1)
	done, stopped := make(chan struct{}), make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			signal.Notify(hup, syscall.SIGHUP)
			go func() {
				defer close(stopped)
				for {
					select {
					case <-hup:
						handle()
					case <-done:
						return
					}
				}
			}()
			return nil
		},
		OnStop: func(ctx context.Context) error {
			signal.Stop(hup)
			close(done)
			select {
			case <-stopped:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
}
