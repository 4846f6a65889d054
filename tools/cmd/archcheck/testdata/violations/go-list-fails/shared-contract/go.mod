module github.com/tech-log/tech-log-backend/shared-contract

go 1.99

require github.com/stretchr/testify v1.12.1
