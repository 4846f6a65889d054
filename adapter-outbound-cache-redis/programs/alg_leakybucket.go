package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// leakyBucketModel: the leaky bucket runs on GCRA's model and state with
// a burst of QueueSize+1 (ADR 0028); its admissions carry their delay
// (numbers.delays, from ratelimit.AlgorithmSpec.Delays).
var leakyBucketModel = model{
	alg:    ratelimit.AlgorithmLeakyBucket,
	slug:   "leaky-bucket",
	layout: gcraModel.layout,
	args: func(dst []any, p ratelimit.Policy) []any {
		delayAfter, _, _ := p.Queue()
		return append(gcraModel.args(dst, p), delayAfter)
	},
	fill: func(p ratelimit.Policy, n numbers) numbers {
		n = gcraModel.fill(p, n)
		if q, ok := p.Params().(ratelimit.LeakyBucket); ok {
			n.delayAfterScaled = q.DelayAfter * n.per // < B*P (G1)
			n.longestDelayMs = q.LongestDelay().Milliseconds()
		}
		return n
	},
	compactArrival: true,
	validState:     gcraModel.validState,
	decide:         gcraModel.decide,
	charge:         gcraModel.charge,
	refund:         numbers.refundGCRA,
}
