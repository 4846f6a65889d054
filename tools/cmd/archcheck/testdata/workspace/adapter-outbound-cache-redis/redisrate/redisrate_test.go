package redisrate_test

import (
	"testing"

	_ "github.com/stretchr/testify/require"

	_ "github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

func TestFixture(t *testing.T) {}
