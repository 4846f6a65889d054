module github.com/tech-log/tech-log-backend/tools

go 1.26

require github.com/tech-log/tech-log-backend/app-bootstrap v0.0.0

replace github.com/tech-log/tech-log-backend/app-bootstrap => ../app-bootstrap
