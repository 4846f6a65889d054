// Command genmanifest renders the rate-limit program files and their manifest
// (adapter-outbound-cache-redis/programs/rate-*.lua and manifest.json): each
// program from the one template source of its algorithm and its variant's
// layout (programs/luasrc), and the manifest from the rendered bytes (name,
// version, algorithm, SHA1 of the exact bytes and the minimum Redis
// version). The files are written beside the manifest. It runs from `go
// generate` in the programs package; with -check it writes nothing and exits
// 1 when a program file or the manifest differs from what it would write.
//
// Like everything under tools/, it may import any module of the workspace;
// no product module may import it.
//
// Files: main.go (flags, rendering the programs and the manifest, -check).
package main
