module github.com/tech-log/tech-log-backend/adapter-inbound-web

go 1.26.0

toolchain go1.26.11

require (
	github.com/stretchr/testify v1.12.1
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect

replace github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
