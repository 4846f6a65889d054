package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// concurrencyModel: a concurrency limit runs on the sliding log's model and
// state layout with maxHold as the window (ADR 0041): a hold is a log
// entry, its release the refund of that entry. Only the algorithm code in
// the header (7) and the set code differ.
var concurrencyModel = model{
	alg:           ratelimit.AlgorithmConcurrency,
	slug:          "concurrency",
	setCode:       6,
	layout:        slidingLogModel.layout,
	args:          slidingLogModel.args,
	fill:          slidingLogModel.fill,
	logEntries:    true,
	validState:    slidingLogModel.validState,
	decide:        slidingLogModel.decide,
	charge:        slidingLogModel.charge,
	refund:        slidingLogModel.refund,
	checkDecision: slidingLogModel.checkDecision,
}
