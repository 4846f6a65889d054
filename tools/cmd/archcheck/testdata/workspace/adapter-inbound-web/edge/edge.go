// Package edge is a fixture: stdlib, x/time and shared-contract.
package edge

import (
	_ "net/http"

	_ "golang.org/x/time/rate"

	_ "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)
