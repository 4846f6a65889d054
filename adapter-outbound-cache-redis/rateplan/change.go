package rateplan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Change is what Set or Unset did.
type Change struct {
	// From and To are the subject's effective plans before and after.
	From, To ratelimit.PlanID
	// Moves are the base policies whose deciding policy changed, with
	// what was carried (ADR 0039).
	Moves []Move
	// Published is how many subscribed connections heard the change (the
	// instances' plan caches and denial caches drop their entries); 0 for
	// a Preview.
	Published int64
}

// ErrNotPublished is wrapped by the error of a change that was committed
// but whose invalidation could not be published: instances see it within
// their cache's TTL and deny meanwhile (the old state is empty).
var ErrNotPublished = errors.New("rateplan: the change is committed, but its invalidation was not published")

// Move is one base policy's change of deciding policy.
type Move struct {
	Base, From, To ratelimit.PolicyID
	// Consumed is what the subject had consumed of From's limit at the
	// change; Carried what To starts with as consumed (at most To's limit).
	Consumed, Carried int64
}

// Set assigns subject to plan (one of the file's plans). In one
// transaction with the assignment, for every base policy whose deciding
// policy changes from A to B (ADR 0040):
//   - B's state holds at least what the subject consumed under A, at most
//     B's limit (programs.Carry), and at least what it had consumed under
//     B when it last left B (the state remembered then, as time has
//     evolved it): so moving back and forth never hands out a budget;
//   - A's state is remembered in the assignment, then charged to empty: an
//     instance that still decides by the old plan until it hears the
//     change denies instead of admitting.
//
// Then the assignment key and every state key written are published on
// the invalidation channel (an error wrapping ErrNotPublished when that
// fails after the commit).
func (s *Store) Set(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID) (Change, error) {
	if !s.plans.Has(plan) {
		return Change{}, fmt.Errorf("rateplan: %w %q: the policy file's plans are %v", ErrUnknownPlan, plan, s.plans.IDs())
	}
	return s.assign(ctx, subject, plan, true)
}

// Unset removes subject's assignment: it is on the default plan, with its
// consumption carried as Set carries it.
func (s *Store) Unset(ctx context.Context, subject ratelimit.SubjectDigest) (Change, error) {
	return s.assign(ctx, subject, "", true)
}

// Preview is what Set (plan not "") or Unset (plan "") would do now,
// changing nothing.
func (s *Store) Preview(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID) (Change, error) {
	if plan != "" && !s.plans.Has(plan) {
		return Change{}, fmt.Errorf("rateplan: %w %q: the policy file's plans are %v", ErrUnknownPlan, plan, s.plans.IDs())
	}
	return s.assign(ctx, subject, plan, false)
}

// move is one Move with its keys and the states it writes.
type move struct {
	Move
	fromKey, toKey     string
	fromState, toState programs.State
	fromTTL, toTTL     int64
	// left is the old policy's state before the change (nil: none), kept
	// in the assignment under FieldLeftPrefix + From.
	left programs.State
}

func (s *Store) assign(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID, write bool) (Change, error) {
	if err := subject.Validate(); err != nil {
		return Change{}, fmt.Errorf("rateplan: subject: %w", err)
	}
	akey, err := Key(s.keys, subject)
	if err != nil {
		return Change{}, fmt.Errorf("rateplan: assignment key: %w", err)
	}
	var change Change
	var moves []move
	txn := func(tx *redis.Tx) error {
		fields, err := tx.HGetAll(ctx, akey).Result()
		if err != nil {
			return fmt.Errorf("HGETALL: %w", err)
		}
		change = Change{From: s.plans.Effective(ratelimit.PlanID(fields[FieldPlan])), To: s.plans.Effective(plan)}
		moves, err = s.moves(subject, change.From, change.To)
		if err != nil {
			return err
		}
		if len(moves) > 0 {
			watch := make([]string, 0, 2*len(moves))
			for _, m := range moves {
				watch = append(watch, m.fromKey, m.toKey)
			}
			if err := tx.Watch(ctx, watch...).Err(); err != nil {
				return fmt.Errorf("WATCH: %w", err)
			}
			t, err := tx.Time(ctx).Result()
			if err != nil {
				return fmt.Errorf("TIME: %w", err)
			}
			now := t.UnixMilli()
			for i := range moves {
				var back programs.State // nil unless the subject left To before
				if v, ok := fields[FieldLeftPrefix+string(moves[i].To)]; ok && v != "" {
					back = programs.State(v)
				}
				if err := s.carry(ctx, tx, &moves[i], back, now); err != nil {
					return err
				}
			}
		}
		if !write {
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range moves {
				if m.toState != nil {
					p.Set(ctx, m.toKey, string(m.toState), time.Duration(m.toTTL)*time.Millisecond)
				} else {
					p.Del(ctx, m.toKey)
				}
				if m.fromState != nil {
					p.Set(ctx, m.fromKey, string(m.fromState), time.Duration(m.fromTTL)*time.Millisecond)
				}
			}
			p.Del(ctx, akey)
			if kept := remembered(fields, moves, plan); len(kept) > 0 {
				p.HSet(ctx, akey, kept)
			}
			return nil
		})
		return err
	}
	for attempt := 1; ; attempt++ {
		err = s.client.Watch(ctx, txn, akey)
		if !errors.Is(err, redis.TxFailedErr) {
			break
		}
		if attempt == maxAttempts {
			return Change{}, fmt.Errorf("rateplan: the subject's state changed during each of %d attempts; try again", maxAttempts)
		}
	}
	if err != nil {
		return Change{}, fmt.Errorf("rateplan: change of plan: %w", err)
	}
	for _, m := range moves {
		change.Moves = append(change.Moves, m.Move)
	}
	if !write {
		return change, nil
	}
	published := []string{akey}
	for _, m := range moves {
		published = append(published, m.toKey, m.fromKey)
	}
	for _, key := range published {
		n, err := ratedenial.Publish(ctx, s.client, key)
		if err != nil {
			return change, fmt.Errorf("%w (instances see it within their cache's TTL, denying meanwhile): %w", ErrNotPublished, err)
		}
		change.Published = max(change.Published, n)
	}
	return change, nil
}

// moves lists the base policies whose deciding policy differs between the
// plans from and to, with their state keys.
func (s *Store) moves(subject ratelimit.SubjectDigest, from, to ratelimit.PlanID) ([]move, error) {
	var out []move
	for _, base := range s.plans.Bases() {
		pf, pt := s.plans.Resolve(from, base), s.plans.Resolve(to, base)
		if pf == pt {
			continue
		}
		fk, err := redisrate.StateKey(s.keys, s.policies[pf], subject)
		if err != nil {
			return nil, fmt.Errorf("state key of %q: %w", pf, err)
		}
		tk, err := redisrate.StateKey(s.keys, s.policies[pt], subject)
		if err != nil {
			return nil, fmt.Errorf("state key of %q: %w", pt, err)
		}
		out = append(out, move{Move: Move{Base: base, From: pf, To: pt}, fromKey: fk, toKey: tk})
	}
	return out, nil
}

// remembered is the assignment's hash after a change to plan (""
// unset): the plan and its time when set, the left states of fields the
// change keeps (not those of the policies it moves to, whose states are
// live again), and the left state of every policy it moves from.
func remembered(fields map[string]string, moves []move, plan ratelimit.PlanID) map[string]any {
	out := map[string]any{}
	for k, v := range fields {
		if strings.HasPrefix(k, FieldLeftPrefix) {
			out[k] = v
		}
	}
	for _, m := range moves {
		delete(out, FieldLeftPrefix+string(m.To))
		delete(out, FieldLeftPrefix+string(m.From))
		if m.left != nil {
			out[FieldLeftPrefix+string(m.From)] = string(m.left)
		}
	}
	if plan != "" {
		out[FieldPlan] = string(plan)
		out[FieldAt] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	}
	return out
}

// carry reads m's old state and computes both states m writes at server
// time now: the new policy's, holding max(what the old one consumed, at
// most the new limit; what back, the new policy's state when the subject
// left it, holds now), and the old one's charged to empty.
func (s *Store) carry(ctx context.Context, tx *redis.Tx, m *move, back programs.State, now int64) error {
	raw, err := tx.Get(ctx, m.fromKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("GET: %w", err)
	}
	if err == nil {
		m.left = programs.State(raw)
	}
	pf, pt := s.policies[m.From], s.policies[m.To]
	m.Consumed = programs.Consumed(pf, m.left, now)
	units := programs.CarriedUnits(pf, m.left, pt, now)
	had := programs.Consumed(pt, back, now)
	switch {
	case had > 0 && had >= units:
		// Back where it had consumed more: its state as time evolved it.
		r, _ := programs.Evaluate(pt, back, now, 1)
		if r.Status == programs.StatusAllowed || r.Status == programs.StatusDenied {
			m.toState, m.toTTL = back, r.ResetAtMillis-r.ServerNowMillis+pt.CleanupGrace().Milliseconds()
		}
	case had > 0:
		m.toState, m.toTTL = programs.ChargedState(pt, back, now, units-had)
	case units > 0:
		m.toState, m.toTTL = programs.ChargedState(pt, nil, now, units)
	}
	if m.toState == nil && units > 0 {
		return fmt.Errorf("carry %q -> %q: the model refused the carried state", m.From, m.To)
	}
	m.Carried = programs.Consumed(pt, m.toState, now)
	m.fromState, m.fromTTL = programs.ChargedState(pf, m.left, now, pf.Limit())
	if m.toState != nil && m.toTTL <= 0 || m.fromState != nil && m.fromTTL <= 0 {
		return fmt.Errorf("carry %q -> %q: a state without a positive TTL", m.From, m.To)
	}
	return nil
}
