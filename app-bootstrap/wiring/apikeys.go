package wiring

import (
	"context"
	"fmt"
	"log/slog"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// envAPIKeysFile names the keys file variable in log lines.
const envAPIKeysFile = config.Prefix + "WEB_API_KEYS_FILE"

// NewAPIKeys builds the key set of APP_WEB_IDENTITY=api-key from the digests
// in APP_WEB_API_KEYS_FILE (read as CheckIdentity does), and reloads APP_WEB_API_KEYS_FILE on SIGHUP while
// the application runs. A reload that fails (unreadable file, malformed
// line, no digest) is logged and keeps the previous set: a typo never locks
// every client out. In the other identity modes it returns nil and listens
// for nothing.
func NewAPIKeys(lc fx.Lifecycle, cfg config.Config, log *slog.Logger) (*subject.APIKeys, error) {
	w := cfg.Web
	if w.Identity != config.IdentityAPIKey {
		return nil, nil
	}
	digests, err := apiKeyDigests(w.APIKeysFile)
	if err != nil {
		return nil, fmt.Errorf("web: api keys: %w", err)
	}
	keys, err := subject.NewAPIKeys(digests)
	if err != nil {
		return nil, fmt.Errorf("web: api keys (%s): %w", envAPIKeysFile, err)
	}
	log = log.With("component", "api-keys")
	onSIGHUP(lc, func() { reloadAPIKeys(keys, w.APIKeysFile, log) })
	lc.Append(fx.Hook{OnStart: func(context.Context) error {
		log.Info("api keys loaded", "keys", keys.Len(), "reload", "SIGHUP")
		return nil
	}})
	return keys, nil
}

// reloadAPIKeys replaces keys with the digests in path, or logs why not and
// keeps the current set. Nothing of the file's content is logged.
func reloadAPIKeys(keys *subject.APIKeys, path string, log *slog.Logger) {
	digests, err := subject.ReadAPIKeysFile(path)
	if err == nil {
		err = keys.Replace(digests)
	}
	if err != nil {
		log.Error("api keys reload failed; keeping the previous set", "var", envAPIKeysFile, "keys", keys.Len(), "err", err)
		return
	}
	log.Info("api keys reloaded", "var", envAPIKeysFile, "keys", keys.Len())
}
