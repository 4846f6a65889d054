package edge

// Violation: go-redis outside the Redis adapter and app-bootstrap.
import _ "github.com/redis/go-redis/v9"
