package rls

import (
	"fmt"
	"math"
	"strconv"
	"time"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// UndecidedHeader is the response header an undecided, fail-closed
// OVER_LIMIT carries: "<kind>" or "<kind>; category=<category>" (for
// example "unavailable; category=connection"), never a subject.
const UndecidedHeader = "x-ratelimit-undecided"

// respond builds the response of decided plans, counts every descriptor,
// and turns an enforced undecided outcome into UNAVAILABLE when the
// operator chose UndecidedError.
func (s *Service) respond(domain string, plans []*plan, fail *failure) (*pb.RateLimitResponse, error) {
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK, Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, len(plans))}
	var deciding []ratelimit.Decision
	var retry time.Duration
	refused := fail != nil
	for _, p := range plans {
		refused = refused || p.over && !p.shadow
	}
	for i, p := range plans {
		st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch p.kind {
		case kindNone:
			s.opt.Metrics.Decision(domain, p.metric, ResultNoRule)
			continue
		case kindUnlimited:
			st.LimitRemaining = math.MaxUint32
			s.opt.Metrics.Decision(domain, p.metric, ResultUnlimited)
			continue
		}
		st.CurrentLimit = currentLimit(p)
		if p.decided {
			remaining := p.dec.Remaining
			if p.refund && refused && p.kind == kindCharge {
				remaining = min(remaining+p.cost, p.dec.Limit) // given back
			}
			st.LimitRemaining = clampU32(remaining)
			if wait, ok := p.dec.ResetAfter(); ok {
				st.DurationUntilReset = durationpb.New(wait)
			}
		}
		result := ResultOK
		switch {
		case p.kind == kindNegative:
			result = ResultNegative
		case p.undecide:
			result = ResultUndecided
		case p.over && p.shadow:
			result = ResultWouldDeny
		case p.over:
			result = ResultOverLimit
			st.Code = pb.RateLimitResponse_OVER_LIMIT
			resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
			if p.decided {
				retry = max(retry, p.dec.RetryAfter)
			} else {
				retry = max(retry, time.Duration(p.policy.WindowMillis())*time.Millisecond)
			}
		case (p.kind == kindCharge || p.kind == kindCheck) && p.outcome == nil:
			// Not asked: an earlier descriptor refused the request.
			st.Code = pb.RateLimitResponse_UNKNOWN
			result = ResultRolledBack
		case p.kind == kindCheck:
			result = ResultCheckOnly
		case p.refund && refused, p.setMember && refused:
			// Admitted and given back, or a member of a refused set
			// (nothing taken).
			result = ResultRolledBack
		}
		s.opt.Metrics.Decision(domain, p.metric, result)
		if p.decided && !p.shadow && p.kind != kindNegative {
			deciding = append(deciding, p.dec)
		}
	}
	if fail != nil {
		if s.opt.Undecided == UndecidedError {
			return nil, status.Errorf(codes.Unavailable, "rls: rate limit undecided: %s", describe(fail.outcome))
		}
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
		for i, p := range plans {
			if p.undecide && !p.shadow {
				resp.Statuses[i].Code = pb.RateLimitResponse_OVER_LIMIT
			}
		}
		retry = max(retry, hint(fail.outcome))
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, header(UndecidedHeader, describe(fail.outcome)))
	}
	if !s.opt.NoHeaders {
		// The rolled-back charges are not counted: report the deciding
		// decision (ratelimit.Deciding) as the HTTP edge does.
		if i := ratelimit.Deciding(deciding); i >= 0 {
			d := deciding[i]
			reset := time.Duration(0)
			if w, ok := d.ResetAfter(); ok {
				reset = w
			}
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
				header("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", string(d.PolicyID), max(d.Remaining, 0), ceilSeconds(reset, 0))),
				header("RateLimit-Policy", fmt.Sprintf("%q;q=%d;w=%d", string(d.PolicyID), d.Limit, ceilSeconds(policyWindow(plans, d.PolicyID), 1))))
		}
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd, header("Retry-After", strconv.FormatInt(ceilSeconds(retry, 1), 10)))
		}
	}
	return resp, nil
}

// currentLimit is a descriptor's current_limit: the rule's own
// requests_per_unit and unit, or for a policy file policy its limit and,
// when the window is one of Envoy's units, that unit.
func currentLimit(p *plan) *pb.RateLimitResponse_RateLimit {
	cl := &pb.RateLimitResponse_RateLimit{Name: p.rule.Name}
	if p.rule.Policy == "" {
		cl.RequestsPerUnit = p.rule.RequestsPerUnit
		cl.Unit = unitOf(p.rule.Unit.Duration())
		return cl
	}
	cl.RequestsPerUnit = clampU32(p.policy.Limit())
	cl.Unit = unitOf(time.Duration(p.policy.WindowMillis()) * time.Millisecond)
	return cl
}

func unitOf(d time.Duration) pb.RateLimitResponse_RateLimit_Unit {
	switch d {
	case time.Second:
		return pb.RateLimitResponse_RateLimit_SECOND
	case time.Minute:
		return pb.RateLimitResponse_RateLimit_MINUTE
	case time.Hour:
		return pb.RateLimitResponse_RateLimit_HOUR
	case 24 * time.Hour:
		return pb.RateLimitResponse_RateLimit_DAY
	case 7 * 24 * time.Hour:
		return pb.RateLimitResponse_RateLimit_WEEK
	}
	return pb.RateLimitResponse_RateLimit_UNKNOWN
}

func policyWindow(plans []*plan, id ratelimit.PolicyID) time.Duration {
	for _, p := range plans {
		if p.kind != kindNone && p.kind != kindUnlimited && p.policy.ID() == id {
			return time.Duration(p.policy.WindowMillis()) * time.Millisecond
		}
	}
	return 0
}

func clampU32(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}

// ceilSeconds is d in whole seconds rounded up, at least least.
func ceilSeconds(d time.Duration, least int64) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, least)
}

func header(k, v string) *corepb.HeaderValue { return &corepb.HeaderValue{Key: k, Value: v} }

// describe names an undecided outcome: its kind and category.
func describe(o ratelimit.Outcome) string {
	if o == nil {
		return string(ratelimit.KindUnknown)
	}
	k := o.Kind()
	switch o.(type) {
	case ratelimit.Unavailable, ratelimit.Indeterminate, ratelimit.Incompatible:
	default:
		k = ratelimit.KindUnknown
	}
	if c := ratelimit.CategoryOf(o); c != "" {
		return string(k) + "; category=" + string(c)
	}
	return string(k)
}

// hint is an undecided outcome's retry-after hint.
func hint(o ratelimit.Outcome) time.Duration {
	switch v := o.(type) {
	case ratelimit.Unavailable:
		return v.RetryAfter
	case ratelimit.Indeterminate:
		return v.RetryAfter
	case ratelimit.Evaluated, ratelimit.Incompatible:
		return 0 // decided, or no retry hint
	}
	return 0
}
