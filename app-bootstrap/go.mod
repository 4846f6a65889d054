module github.com/tech-log/tech-log-backend/app-bootstrap

go 1.26.0

require (
	github.com/caarlos0/env/v11 v11.4.2
	github.com/stretchr/testify v1.12.1
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect

replace (
	github.com/tech-log/tech-log-backend/adapter-inbound-web => ../adapter-inbound-web
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis => ../adapter-outbound-cache-redis
	github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
)
