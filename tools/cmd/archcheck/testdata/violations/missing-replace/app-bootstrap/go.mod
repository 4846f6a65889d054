module github.com/tech-log/tech-log-backend/app-bootstrap

go 1.26

require (
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/fx v1.24.0
	github.com/tech-log/tech-log-backend/adapter-inbound-web v0.0.0
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis v0.0.0
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

replace (
	github.com/tech-log/tech-log-backend/adapter-inbound-web => ../adapter-inbound-web
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis => ../adapter-outbound-cache-redis
)
