package ratelimiter_test

import (
	"context"
	"fmt"
	"log"

	"github.com/tech-log/tech-log-backend/app-bootstrap/ratelimiter"
)

// Example is the first decision: ten lines, the README's first code block
// (there with Addr "localhost:6379"). The subject "project:123" reaches
// Redis only as an HMAC; the limiter has the service's defaults and fails
// closed.
func Example() {
	addr, stop := privateRedis() // your Redis, "localhost:6379"
	defer stop()

	ctx := context.Background()
	limiter, err := ratelimiter.New(ctx, ratelimiter.Options{
		Addr: addr, Secret: "use-32-or-more-random-bytes-from-your-vault",
		Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(10)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	fmt.Println(limiter.Allow(ctx, "api", "project:123"))
	// Output: allowed, 9 of 10 left <nil>
}
