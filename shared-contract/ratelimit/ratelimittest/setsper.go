package ratelimittest

import (
	"context"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// member is one member of a set of per-member subjects and costs.
type member struct {
	id      ratelimit.PolicyID
	subject ratelimit.SubjectDigest
	cost    int64
}

// askPerMember asks port for a set whose members each have their own
// subject and cost (SetRequest.Subjects and Costs).
func askPerMember(port ratelimit.EdgePort, ms ...member) ratelimit.Outcome {
	req := ratelimit.SetRequest{Deadline: time.Now().Add(30 * time.Second)}
	for _, m := range ms {
		req.Members = append(req.Members, m.id)
		req.Subjects = append(req.Subjects, m.subject)
		req.Costs = append(req.Costs, m.cost)
	}
	return port.EvaluateSet(context.Background(), req)
}

// remaining asks id alone for one unit of subject and returns what was
// left before it (the decision's Remaining plus the unit).
func remaining(t *testing.T, port ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) int64 {
	t.Helper()
	d := evaluated(t, ask(port, id, subject, 1), string(id)+" alone")
	if !d.Allowed {
		return 0
	}
	return d.Remaining + 1
}

// runPerMember checks sets of per-member subjects and costs: each member
// takes its own cost from its own subject's budget, a policy may repeat
// for another subject, a member's subject or cost that denies consumes
// nothing of the others (each reports what it answered), and
// one policy twice for one subject is refused.
func runPerMember(t *testing.T, port ratelimit.EdgePort) {
	t.Run("per-member subjects and costs", func(t *testing.T) {
		s1, s2 := Subject(t), Subject(t)
		out := askPerMember(port, member{"c-fixed", s1, 2}, member{"c-fixed", s2, 3}, member{"c-bucket", s1, 1})
		if d := evaluated(t, out, "set"); !d.Allowed {
			t.Fatalf("set: %v, want allowed", d)
		}
		ms := out.(ratelimit.Evaluated).Members
		want := []struct {
			id   ratelimit.PolicyID
			rem  int64
			cost int64
		}{{"c-fixed", 3, 2}, {"c-fixed", 2, 3}, {"c-bucket", 4, 1}}
		if len(ms) != len(want) {
			t.Fatalf("set: %d members, want %d", len(ms), len(want))
		}
		for i, w := range want {
			if m := ms[i]; m.PolicyID != w.id || !m.Allowed || m.Remaining != w.rem || m.Receipt.Cost() != w.cost {
				t.Errorf("member %d: %v (receipt of %d), want %s allowed remaining %d with a receipt of %d", i, m, m.Receipt.Cost(), w.id, w.rem, w.cost)
			}
		}
		if got := remaining(t, port, "c-fixed", s1); got != 3 {
			t.Errorf("c-fixed of subject 1 after the set: %d left, want 3", got)
		}
		if got := remaining(t, port, "c-fixed", s2); got != 2 {
			t.Errorf("c-fixed of subject 2 after the set: %d left, want 2", got)
		}
	})

	t.Run("one member's subject or cost denies, nothing consumed", func(t *testing.T) {
		s1, s2 := Subject(t), Subject(t)
		for range 5 {
			if !ratelimit.Admitted(ask(port, "c-fixed", s2, 1)) {
				t.Fatal("c-fixed alone: not admitted")
			}
		}
		// Cost 2 for subject 1: in a cluster its slot group may admit
		// first and be given back, its own cost and no other.
		out := askPerMember(port, member{"c-fixed", s1, 2}, member{"c-fixed", s2, 1})
		if d := evaluated(t, out, "set"); d.Allowed {
			t.Fatalf("set: %v, want denied by subject 2's c-fixed", d)
		}
		ms := out.(ratelimit.Evaluated).Members
		if len(ms) != 2 || !ms[0].Allowed || ms[0].Remaining != 3 || ms[1].Allowed {
			t.Errorf("members %v, want subject 1 as it answered (would admit, remaining 3) then subject 2 denied", ms)
		}
		if got := remaining(t, port, "c-fixed", s1); got != 5 {
			t.Errorf("c-fixed of subject 1 after the denied set: %d left, want 5 (nothing consumed)", got)
		}
		s := Subject(t)
		d := evaluated(t, askPerMember(port, member{"c-sliding", s, 1}, member{"c-gcra", s, 5}, member{"c-log", s, 1}), "set")
		if !d.Allowed {
			t.Fatalf("set of costs 1, 5, 1: %v, want allowed", d)
		}
		d = evaluated(t, askPerMember(port, member{"c-sliding", s, 1}, member{"c-gcra", s, 1}), "set")
		if d.Allowed || d.PolicyID != "c-gcra" {
			t.Fatalf("set after c-gcra's whole burst: %v, want denied by c-gcra", d)
		}
		if got := remaining(t, port, "c-sliding", s); got != 4 {
			t.Errorf("c-sliding after: %d left, want 4 (only the admitted set's unit)", got)
		}
	})

	t.Run("one policy twice for one subject is refused", func(t *testing.T) {
		s := Subject(t)
		refused(t, askPerMember(port, member{"c-fixed", s, 1}, member{"c-fixed", s, 1}), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest)
		refused(t, askPerMember(port, member{"c-fixed", s, 1}, member{"c-bucket", s, 6}), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest)
		if got := remaining(t, port, "c-fixed", s); got != 5 {
			t.Errorf("c-fixed after refused sets: %d left, want 5", got)
		}
	})
}
