package redistest

import (
	"fmt"
	"strconv"
	"strings"
)

// env is the part of the environment Start reads.
type env struct {
	lane     string
	addr     string
	image    string
	required bool
}

// readEnv resolves the lane and its settings from getenv.
func readEnv(getenv func(string) string) (env, error) {
	e := env{
		lane:  strings.TrimSpace(getenv(EnvLane)),
		addr:  strings.TrimSpace(getenv(EnvAddr)),
		image: strings.TrimSpace(getenv(EnvImage)),
	}
	if e.image == "" {
		e.image = DefaultImage
	}
	if v := strings.TrimSpace(getenv(EnvRequired)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return env{}, fmt.Errorf("redistest: %s=%q: want 1 or 0: %w", EnvRequired, v, err)
		}
		e.required = b
	}
	switch e.lane {
	case "":
		e.lane = LaneProcess
		if e.addr != "" {
			e.lane = LaneExternal
		}
	case LaneProcess, LaneContainer:
		if e.addr != "" {
			return env{}, fmt.Errorf("redistest: %s=%q conflicts with %s=%q (unset one)", EnvLane, e.lane, EnvAddr, e.addr)
		}
	case LaneExternal:
		if e.addr == "" {
			return env{}, fmt.Errorf("redistest: %s=external needs %s=host:port", EnvLane, EnvAddr)
		}
	default:
		return env{}, fmt.Errorf("redistest: %s=%q: want process, container or external", EnvLane, e.lane)
	}
	return e, nil
}

type verdict int

const (
	verdictRun verdict = iota + 1
	verdictSkip
	verdictFail
)

// decide says what Start does given the lane's missing prerequisite ("" when
// nothing is missing): run, or fail under REDIS_REQUIRED, or skip.
func decide(required bool, missing string) verdict {
	switch {
	case missing == "":
		return verdictRun
	case required:
		return verdictFail
	default:
		return verdictSkip
	}
}
