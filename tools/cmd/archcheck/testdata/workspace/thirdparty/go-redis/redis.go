// Package redis is a fixture stand-in for github.com/redis/go-redis/v9.
package redis
