package ratelimit

// Violation: a third-party package in shared-contract.
import _ "github.com/acme/leftpad"
