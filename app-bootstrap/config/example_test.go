package config_test

import (
	"fmt"
	"strings"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// ExampleParsePolicies reads a policy file strictly: a second "limit" in the
// same policy is an error naming the policy and the key, not a silent
// override.
func ExampleParsePolicies() {
	set, err := config.ParsePolicies(strings.NewReader(config.DefaultPoliciesJSON()))
	if err != nil {
		panic(err)
	}
	for _, r := range set.Routes {
		fmt.Printf("%s -> %s\n", r.Pattern, r.Policy)
	}

	_, err = config.ParsePolicies(strings.NewReader(`{"policies": [{"id": "login", "limit": 5, "limit": 500}]}`))
	fmt.Println(err)
	// Output:
	// GET /api/ -> api
	// POST /api/v1/login -> login
	// invalid policy file: policies[0] (login): duplicate key "limit"
}

// ExampleLoad loads the configuration from APP_ variables (usually
// config.FromEnviron(os.Environ())). Unset relations are derived: the
// evaluation timeout from the command timeout, the in-flight bound from the
// pool size.
func ExampleLoad() {
	cfg, err := config.Load(map[string]string{
		"APP_RATE_LIMIT_ENABLED":         "true",
		"APP_RATE_LIMIT_PROVIDER":        "redis",
		"APP_RATE_LIMIT_REDIS_ADDR":      "127.0.0.1:6390",
		"APP_RATE_LIMIT_KEY_SECRET":      "example-key-secret-0123456789abcdef",
		"APP_RATE_LIMIT_POLICIES_FILE":   "../examples/policies.json",
		"APP_RATE_LIMIT_DEFAULT_POLICY":  "api",
		"APP_RATE_LIMIT_COMMAND_TIMEOUT": "300ms",
		"APP_RATE_LIMIT_POOL_SIZE":       "32",
		"APP_WEB_SUBJECT_SECRET":         "example-subject-secret-0123456789ab",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("evaluation timeout:", cfg.Web.EvaluationTimeout)
	fmt.Println("max in flight:", cfg.RateLimit.MaxInFlight)

	// A broken configuration: one *VarError per problem, each naming its
	// variable.
	_, err = config.Load(map[string]string{"APP_RATE_LIMIT_ENABLED": "true", "APP_RATE_LIMIT_PROVIDER": "redis"})
	for _, ve := range config.VarErrors(err) {
		fmt.Println(ve.Var)
	}
	// Output:
	// evaluation timeout: 600ms
	// max in flight: 32
	// APP_RATE_LIMIT_REDIS_ADDR
	// APP_RATE_LIMIT_KEY_SECRET
	// APP_RATE_LIMIT_POLICIES_FILE
	// APP_RATE_LIMIT_DEFAULT_POLICY
	// APP_WEB_SUBJECT_SECRET
}
