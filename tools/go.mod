module github.com/tech-log/tech-log-backend/tools

go 1.26.0

require github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis v0.0.0

require github.com/tech-log/tech-log-backend/shared-contract v0.0.0 // indirect

replace (
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis => ../adapter-outbound-cache-redis
	github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
)
