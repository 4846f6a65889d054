package send

import (
	"strconv"
	"time"
)

// New returns an executor over one fixed target, client; now is
// the clock sendBy is compared with.
func New(client Commander, now func() time.Time) *Executor {
	x := &Executor{now: now}
	x.route = &fixedRoute{t: newTarget(0, "", client)}
	x.calls.New = func() any { return &call{ready: make(chan bool, 1)} }
	return x
}

// EnableBatching turns batching on with at most maxBatch calls per batch
// and slots connection turns per target; maxBatch <= 1 leaves it off, as
// does a target client that cannot pipeline (then every call is sent
// alone).
func (x *Executor) EnableBatching(slots, maxBatch int) {
	if maxBatch <= 1 || slots < 1 {
		return
	}
	x.maxBatch, x.slots = maxBatch, slots
}

// SetReplicationAcks makes every program command carry WAIT acks
// timeoutMs pipelined right behind it on the same connection; 0 is off.
func (x *Executor) SetReplicationAcks(acks, timeoutMs int64) {
	x.acks, x.ackTimeoutMs = acks, timeoutMs
}

// SetBreakers gives every target a circuit breaker built from opts
// (Threshold 0: none); timeout bounds each recovery probe.
func (x *Executor) SetBreakers(opts BreakerOptions, timeout time.Duration) {
	x.breakerOpts, x.timeout = opts, timeout
}

// UseCluster routes calls through r (the cluster's slot map) instead of
// the one fixed target.
func (x *Executor) UseCluster(r *ClusterRouter) { x.route = r }

// SetMaxInFlight bounds the program calls on the wire to each target at n
// (n < 1: no bound). A call beyond it is answered
// NotSent{ReasonInFlight} at once, without waiting. Call it before the
// first Run.
func (x *Executor) SetMaxInFlight(n int) { x.maxInFlight = max(n, 0) }

// BatchStats counts one target's pipelined program calls: batches
// written, the calls in them (a call sent alone is in neither), and the
// calls queued right now.
func (b *batcher) stats() (batches, calls int64, queued int) {
	b.mu.Lock()
	queued = len(b.queue)
	b.mu.Unlock()
	return b.batches.Load(), b.batched.Load(), queued
}

// PipelineStats sums the batching counters over the targets serving now:
// batches written, the calls in them, and the calls queued right now;
// zero with batching off.
func (x *Executor) PipelineStats() (batches, calls int64, queued int) {
	for _, t := range x.route.targets() {
		if b := t.batch.Load(); b != nil {
			n, k, q := b.stats()
			batches, calls, queued = batches+n, calls+k, queued+q
		}
	}
	return batches, calls, queued
}

// Batching reports the batching settings: connection turns per target and
// calls per batch (0, 0: off).
func (x *Executor) Batching() (slots, maxBatch int) { return x.slots, x.maxBatch }

// TargetBreaker is the circuit breaker of one target: the server, or one
// cluster primary.
type TargetBreaker struct {
	// Target names the target without its address: "0" for a standalone
	// or Sentinel endpoint, the primary's index (in the order the
	// provider met it) in a cluster. Stable for the provider's life.
	Target string
	// Slots is the primary's hash-slot ranges ("0-5460"), "" for a
	// standalone or Sentinel endpoint.
	Slots string
	State BreakerState
}

// BreakerTargets reports the breaker of every target serving now (the
// server, or the primaries of the slot map), in target order; nil without
// breakers.
func (x *Executor) BreakerTargets() []TargetBreaker {
	if x.breakerOpts.Threshold == 0 {
		return nil
	}
	var out []TargetBreaker
	for _, t := range x.route.targets() {
		out = append(out, TargetBreaker{Target: strconv.Itoa(t.index), Slots: x.route.slotsOf(t), State: x.breakerOf(t).state()})
	}
	return out
}

// BreakerState is the worst breaker state over the targets serving now
// (open, then half_open, then closed); BreakerDisabled without breakers.
func (x *Executor) BreakerState() BreakerState {
	if x.breakerOpts.Threshold == 0 {
		return BreakerDisabled
	}
	worst := BreakerClosed
	for _, t := range x.route.targets() {
		switch x.breakerOf(t).state() {
		case BreakerOpen:
			return BreakerOpen
		case BreakerHalfOpen:
			worst = BreakerHalfOpen
		case BreakerClosed, BreakerDisabled:
		}
	}
	return worst
}

// BreakerTrips is how many times a target's breaker has opened, summed
// over every target met.
func (x *Executor) BreakerTrips() uint64 {
	var n uint64
	for _, t := range x.route.met() {
		if b := t.breaker.Load(); b != nil {
			n += b.trips.Load()
		}
	}
	return n
}

// OnBreakerChange registers f to be told every change of a target's
// breaker (open, closed); call it before the first call. It is called
// synchronously and must not block.
func (x *Executor) OnBreakerChange(f func(BreakerState)) {
	x.onBreakerChange = append(x.onBreakerChange, f)
}

// ShutdownBreakers stops every target's prober and waits for them.
func (x *Executor) ShutdownBreakers() {
	x.breakersShut.Store(true)
	for _, t := range x.route.met() {
		t.breaker.Load().shutdown()
	}
}

// Bounds of BreakerOptions.
const (
	// MaxBreakerThreshold bounds BreakerOptions.Threshold.
	MaxBreakerThreshold = 1000
	// MinProbeInterval and MaxProbeInterval bound
	// BreakerOptions.ProbeInterval.
	MinProbeInterval = 10 * time.Millisecond
	MaxProbeInterval = time.Minute
)

// BreakerOptions configures the provider's circuit breaker. The zero value
// turns it off (every call is sent, as in R1).
type BreakerOptions struct {
	// Threshold is the number of consecutive program calls failing with a
	// connection failure or a timeout (Unavailable{connection},
	// Indeterminate{timeout}, Indeterminate{connection_lost}) that opens the
	// breaker; 0 turns the breaker off, else 1..MaxBreakerThreshold. Any
	// answer of the server (a decision, a refusal, an Incompatible reply)
	// ends the run; other failures (admission, deadline, cancelled, closed)
	// neither count nor end it.
	Threshold int
	// ProbeInterval is the longest wait between two recovery probes while
	// the breaker is open, in MinProbeInterval..MaxProbeInterval. Each wait
	// is drawn uniformly from [ProbeInterval/2, ProbeInterval] (jitter, so
	// that instances do not probe in step).
	ProbeInterval time.Duration
}

// BreakerState is the state of the provider's circuit breaker, as reported
// by Provider.BreakerState. The values are stable: metrics and readiness
// use them.
type BreakerState string

// The breaker states.
const (
	// BreakerDisabled: the provider has no breaker.
	BreakerDisabled BreakerState = "disabled"
	// BreakerClosed: calls are sent.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: calls are answered Unavailable{circuit_open} unsent; a
	// background probe is scheduled.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: calls are still answered Unavailable{circuit_open};
	// the one recovery probe is in flight.
	BreakerHalfOpen BreakerState = "half_open"
)

// Addr is the target's address ("" for a fixed target); for errors and
// logs, never a metric label.
func (t *Target) Addr() string { return t.addr }

// Client is the target's client.
func (t *Target) Client() Commander { return t.client }
