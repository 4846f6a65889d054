module github.com/testcontainers/testcontainers-go

go 1.26
