package config

import "time"

// Prefix is the prefix of every variable this package reads.
const Prefix = "APP_"

// rawConfig mirrors the environment one to one; Load validates it into a
// Config. Field order is the order in which problems are reported.
type rawConfig struct {
	RateLimit       rawRateLimit  `envPrefix:"RATE_LIMIT_"`
	Cache           rawCache      `envPrefix:"CACHE_"`
	Web             rawWeb        `envPrefix:"WEB_"`
	LogFormat       string        `env:"LOG_FORMAT" envDefault:"auto"`
	LogLevel        string        `env:"LOG_LEVEL" envDefault:"info"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s"`
}

type rawRateLimit struct {
	Enabled          bool          `env:"ENABLED" envDefault:"false"`
	Provider         string        `env:"PROVIDER"`
	Role             string        `env:"ROLE" envDefault:"coordination"`
	FailurePolicy    string        `env:"FAILURE_POLICY" envDefault:"fail-closed"`
	Redis            rawRedis      `envPrefix:"REDIS_"`
	KeySecret        Secret        `env:"KEY_SECRET"`
	KeySecretFile    string        `env:"KEY_SECRET_FILE"`
	KeyPrefix        string        `env:"KEY_PREFIX" envDefault:"tlb"`
	CommandTimeout   time.Duration `env:"COMMAND_TIMEOUT" envDefault:"250ms"`
	DialTimeout      time.Duration `env:"DIAL_TIMEOUT" envDefault:"250ms"`
	PoolTimeout      time.Duration `env:"POOL_TIMEOUT" envDefault:"250ms"`
	MaxInFlight      int           `env:"MAX_IN_FLIGHT" envDefault:"64"`
	PoolSize         int           `env:"POOL_SIZE" envDefault:"64"`
	DefaultPolicy    string        `env:"DEFAULT_POLICY"`
	PoliciesFile     string        `env:"POLICIES_FILE"`
	AllowSharedRedis bool          `env:"ALLOW_SHARED_REDIS" envDefault:"false"`
}

type rawCache struct {
	Enabled bool          `env:"ENABLED" envDefault:"false"`
	Redis   rawCacheRedis `envPrefix:"REDIS_"`
}

type rawCacheRedis struct {
	Conn           rawRedis
	KeySecret      Secret        `env:"KEY_SECRET"`
	KeySecretFile  string        `env:"KEY_SECRET_FILE"`
	KeyPrefix      string        `env:"KEY_PREFIX" envDefault:"tlb"`
	DB             int           `env:"DB" envDefault:"0"`
	CommandTimeout time.Duration `env:"COMMAND_TIMEOUT" envDefault:"100ms"`
	DialTimeout    time.Duration `env:"DIAL_TIMEOUT" envDefault:"250ms"`
	PoolTimeout    time.Duration `env:"POOL_TIMEOUT" envDefault:"250ms"`
	PoolSize       int           `env:"POOL_SIZE" envDefault:"16"`
}

// rawRedis is the connection part shared by the coordination and cache
// sections; each section has its own copy under its own prefix.
type rawRedis struct {
	Addr         string `env:"ADDR"`
	Username     string `env:"USERNAME"`
	Password     Secret `env:"PASSWORD"`
	PasswordFile string `env:"PASSWORD_FILE"`
	TLS          rawTLS `envPrefix:"TLS_"`
}

type rawTLS struct {
	Enabled            bool   `env:"ENABLED" envDefault:"false"`
	CAFile             string `env:"CA_FILE"`
	CertFile           string `env:"CERT_FILE"`
	KeyFile            string `env:"KEY_FILE"`
	ServerName         string `env:"SERVER_NAME"`
	InsecureSkipVerify bool   `env:"INSECURE_SKIP_VERIFY" envDefault:"false"`
}

type rawWeb struct {
	Addr              string        `env:"ADDR" envDefault:":8080"`
	SubjectSecret     Secret        `env:"SUBJECT_SECRET"`
	SubjectSecretFile string        `env:"SUBJECT_SECRET_FILE"`
	TrustedProxies    []string      `env:"TRUSTED_PROXIES" envSeparator:","`
	EvaluationTimeout time.Duration `env:"EVALUATION_TIMEOUT" envDefault:"500ms"`
	LocalLimitEnabled bool          `env:"LOCAL_LIMIT_ENABLED" envDefault:"true"`
	LocalLimitRate    float64       `env:"LOCAL_LIMIT_RATE" envDefault:"10"`
	LocalLimitBurst   int           `env:"LOCAL_LIMIT_BURST" envDefault:"20"`
	LocalLimitMax     int           `env:"LOCAL_LIMIT_MAX_CLIENTS" envDefault:"10000"`
	LocalLimitIdleTTL time.Duration `env:"LOCAL_LIMIT_IDLE_TTL" envDefault:"5m"`
}
