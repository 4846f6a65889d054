package redisrate

// Violation: fx outside app-bootstrap.
import _ "go.uber.org/fx"
