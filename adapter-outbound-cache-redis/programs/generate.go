package programs

// The manifest is derived from the embedded sources; regenerate it after
// editing a program (TestManifestMatchesSources fails until then).
//go:generate go run -C ../../tools ./cmd/genmanifest -o ../adapter-outbound-cache-redis/programs/manifest.json
