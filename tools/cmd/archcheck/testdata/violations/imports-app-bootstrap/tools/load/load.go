// Package load is a fixture tool package.
package load

// Violation: nothing imports app-bootstrap, not even tools.
import _ "github.com/tech-log/tech-log-backend/app-bootstrap/config"
