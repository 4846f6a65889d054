module github.com/acme/leftpad

go 1.26
