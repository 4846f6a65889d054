package ratelimittest

import (
	"context"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// askSet asks port for a set of members on subject at cost 1.
func askSet(port ratelimit.EdgePort, subject ratelimit.SubjectDigest, members ...ratelimit.PolicyID) ratelimit.Outcome {
	return port.EvaluateSet(context.Background(), ratelimit.SetRequest{Members: members, SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(30 * time.Second)})
}

// RunSets checks what every ratelimit.EdgePort's EvaluateSet must do (ADR 0027) over
// Policies: a set admits only while every member admits, reporting every
// member; a set denied by one member consumes nothing of the others,
// whichever position the denying member has; the member that speaks for
// the set is ratelimit.Deciding's; an invalid set (a repeated or unknown
// member) is refused and consumes nothing; every admitted member carries
// a receipt; sets of per-member subjects and costs (SetRequest.Subjects
// and Costs) take each member's cost from its own subject's budget, and
// one policy twice for one subject is refused.
func RunSets(t *testing.T, newPort NewPort) {
	t.Helper()
	ClearOfWindowEnd(t, time.Hour, time.Minute)
	port := newPort(t, Policies(t, 1))
	sets := port
	ids := []ratelimit.PolicyID{"c-fixed", "c-sliding", "c-bucket", "c-gcra", "c-log"}

	t.Run("admits while every member admits, then denies", func(t *testing.T) {
		s := Subject(t)
		for i := range 5 {
			out := askSet(sets, s, ids...)
			d := evaluated(t, out, "set")
			members := out.(ratelimit.Evaluated).Members
			if !d.Allowed || len(members) != len(ids) {
				t.Fatalf("set %d: allowed %t with %d members, want allowed with %d", i, d.Allowed, len(members), len(ids))
			}
			for j, m := range members {
				if m.PolicyID != ids[j] || !m.Allowed || m.Remaining != int64(4-i) || m.Receipt.IsZero() {
					t.Errorf("set %d member %d: %v (receipt zero %t), want %s allowed remaining %d with a receipt", i, j, m, m.Receipt.IsZero(), ids[j], 4-i)
				}
			}
			if d != members[ratelimit.Deciding(members)] {
				t.Errorf("set %d: Decision is not Deciding's member", i)
			}
		}
		d := evaluated(t, askSet(sets, s, ids...), "sixth set")
		if d.Allowed || d.RetryAfter <= 0 {
			t.Errorf("sixth set: %v, want denied with a retry-after", d)
		}
	})

	for name, first := range map[string]bool{"denying member first": true, "denying member second": false} {
		t.Run("a denial consumes nothing of the other member, "+name, func(t *testing.T) {
			s := Subject(t)
			// Spend c-bucket alone, then ask sets with it first or second.
			for range 5 {
				if !ratelimit.Admitted(ask(port, "c-bucket", s, 1)) {
					t.Fatal("c-bucket alone: not admitted")
				}
			}
			pair := []ratelimit.PolicyID{"c-fixed", "c-bucket"}
			if first {
				pair = []ratelimit.PolicyID{"c-bucket", "c-fixed"}
			}
			for i := range 10 {
				d := evaluated(t, askSet(sets, s, pair...), "set")
				if d.Allowed || d.PolicyID != "c-bucket" {
					t.Fatalf("set %d: %v, want denied by c-bucket", i, d)
				}
			}
			if d := evaluated(t, ask(port, "c-fixed", s, 1), "c-fixed after"); !d.Allowed || d.Remaining != 4 {
				t.Errorf("c-fixed after 10 denied sets: %v, want allowed remaining 4 (nothing consumed)", d)
			}
		})
	}

	t.Run("an invalid set is refused and consumes nothing", func(t *testing.T) {
		s := Subject(t)
		refused(t, askSet(sets, s, "c-fixed", "c-fixed"), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest)
		refused(t, askSet(sets, s, "c-fixed", "c-nope"), ratelimit.KindUnavailable, ratelimit.CategoryUnknownPolicy)
		refused(t, askSet(sets, s), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest)
		if d := evaluated(t, ask(port, "c-fixed", s, 1), "c-fixed after"); d.Remaining != 4 {
			t.Errorf("c-fixed after refused sets: remaining %d, want 4", d.Remaining)
		}
	})
	runPerMember(t, sets)
}
