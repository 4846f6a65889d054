module github.com/tech-log/tech-log-backend/app-bootstrap

go 1.26.0

require (
	github.com/caarlos0/env/v11 v11.4.2
	github.com/stretchr/testify v1.12.1
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

require (
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/fx v1.24.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace (
	github.com/tech-log/tech-log-backend/adapter-inbound-web => ../adapter-inbound-web
	github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis => ../adapter-outbound-cache-redis
	github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
)
