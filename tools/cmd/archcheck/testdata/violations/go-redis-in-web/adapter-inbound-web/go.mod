module github.com/tech-log/tech-log-backend/adapter-inbound-web

go 1.26

require (
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/time v0.16.0
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

replace github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
