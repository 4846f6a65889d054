package edge

// Violation: an adapter importing the other adapter.
import _ "github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
