module github.com/tech-log/tech-log-backend/shared-contract

go 1.26

toolchain go1.26.11

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.6 // indirect
