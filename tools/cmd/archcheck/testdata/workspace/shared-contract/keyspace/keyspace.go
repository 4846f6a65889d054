// Package keyspace is a fixture importing a sibling package of its module.
package keyspace

import _ "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
