module github.com/tech-log/tech-log-backend/shared-contract

go 1.26

require (
	github.com/acme/leftpad v1.0.0
	github.com/stretchr/testify v1.12.1
)
