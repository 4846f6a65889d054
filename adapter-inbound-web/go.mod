module github.com/tech-log/tech-log-backend/adapter-inbound-web

go 1.26

require github.com/tech-log/tech-log-backend/shared-contract v0.0.0

replace github.com/tech-log/tech-log-backend/shared-contract => ../shared-contract
