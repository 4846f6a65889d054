module github.com/tech-log/tech-log-backend/adapter-inbound-web

go 1.26

require (
	golang.org/x/time v0.16.0
	github.com/tech-log/tech-log-backend/shared-contract v0.0.0
)

replace github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
