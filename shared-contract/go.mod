module github.com/tech-log/tech-log-backend/shared-contract

go 1.26
