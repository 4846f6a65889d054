// Command genmanifest writes the rate-limit program manifest
// (adapter-outbound-cache-redis/programs/manifest.json) from the embedded Lua
// sources: name, version, algorithm, SHA1 of the exact bytes and the minimum
// Redis version. It runs from `go generate` in the programs package; with
// -check it writes nothing and exits 1 when the file is stale.
//
// Like everything under tools/, it may import any module of the workspace;
// no product module may import it.
package main
