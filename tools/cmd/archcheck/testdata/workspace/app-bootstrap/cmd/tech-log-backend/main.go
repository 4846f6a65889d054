// Command tech-log-backend is a fixture composition root: fx, go-redis and both adapters.
package main

import (
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/fx"

	_ "github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	_ "github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	_ "github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

func main() {}
