// Package redisrate is a fixture: go-redis and shared-contract.
package redisrate

import (
	_ "context"

	_ "github.com/redis/go-redis/v9"

	_ "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)
