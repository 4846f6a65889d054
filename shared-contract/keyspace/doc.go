// Package keyspace owns the canonical physical key format shared by every
// Redis-backed capability:
//
//	<prefix>:<capability>:<region>:<kind>:v1:<digest>
//
// where digest is the unpadded base64url HMAC-SHA256, under a secret of at
// least 32 bytes, of the length-prefixed capability, region, kind and caller
// fields. Raw subjects, IPs, API keys and routes go into the digest only, so
// they never appear in a key. Anything that holds the secret redacts it in
// every textual form.
//
// It must never import anything outside the Go standard library.
package keyspace
