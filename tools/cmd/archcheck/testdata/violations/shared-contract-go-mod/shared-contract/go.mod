module github.com/tech-log/tech-log-backend/shared-contract

go 1.26

// Violation: a require other than testify, even with no import of it.
require (
	github.com/acme/leftpad v1.0.0
	github.com/stretchr/testify v1.12.1
)
