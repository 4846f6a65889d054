package wiring

import (
	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// constructors are one capability's client constructors, one per topology
// mode. Each builds with the capability's own constructor (redisrate's or
// rediscache's, over the adapter's one option builder); a topology
// constructor is handed no standalone address.
type constructors struct {
	standalone func() (redis.UniversalClient, error)
	sentinel   func() (redis.UniversalClient, error)
	cluster    func() (redis.UniversalClient, error)
}

// byTopology is the one topology switch of the service's Redis clients: it
// runs the constructor of t's mode (standalone when the mode is empty). It
// does no I/O.
func byTopology(t config.Topology, c constructors) (redis.UniversalClient, error) {
	switch t.Mode {
	case config.ModeSentinel:
		return c.sentinel()
	case config.ModeCluster:
		return c.cluster()
	default:
		return c.standalone()
	}
}

// universal returns a constructor's client as a redis.UniversalClient, or
// a nil interface with its error (never a typed nil pointer).
func universal[C redis.UniversalClient](c C, err error) (redis.UniversalClient, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}
