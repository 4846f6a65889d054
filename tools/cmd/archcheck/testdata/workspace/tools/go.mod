module github.com/tech-log/tech-log-backend/tools

go 1.26
