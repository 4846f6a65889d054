package redistest

import (
	"sync"
	"time"
)

// Load runs a bounded concurrent load against the servers a test started:
// workers goroutines; worker w calls each(w, i) for i in 0..perWorker-1,
// sleeping pause after each call (0: none), and returns early once done
// reports true (asked before every call; nil: never). Load returns when
// every worker has returned: bounded in count by workers x perWorker, and
// in time by done and each's own deadlines. It is the one load loop of the
// service and reliability tests.
func Load(workers, perWorker int, pause time.Duration, done func() bool, each func(w, i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if done != nil && done() {
					return
				}
				each(w, i)
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	wg.Wait()
}

// Closed returns a Load done func that reports whether stop is closed.
func Closed(stop <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
}
