package programs

// The program files rate-*.lua and the manifest are rendered from the
// templates in luasrc (one source per algorithm); edit those and regenerate
// (TestSourcesAreRendered and TestManifestMatchesSources fail until then).
//go:generate go run -C ../../tools ./cmd/genmanifest -o ../adapter-outbound-cache-redis/programs/manifest.json
