module github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis

go 1.26

require (
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/fx v1.24.0
	github.com/stretchr/testify v1.12.1
	github.com/testcontainers/testcontainers-go v0.45.0
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

replace github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
