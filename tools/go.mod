module github.com/tech-log/tech-log-backend/tools

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis v0.0.0
)

require (
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace (
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis => ../adapter-outbound-cache-redis
	github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
)
