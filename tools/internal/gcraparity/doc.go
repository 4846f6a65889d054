// Package gcraparity holds the drop-in proof of the GCRA policy against
// go-redis/redis_rate itself (issue 22 item 4, ADR 0021): parity_test.go
// runs redis_rate's Allow and the rate-gcra-v1 program side by side on one
// Redis (miniredis, whose TIME both read at the same instant) over seeded
// random traces, and names every step where their admissions differ. It
// has no non-test code.
package gcraparity
