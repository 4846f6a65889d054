// Package keyspace owns the canonical physical key format shared by every
// Redis-backed capability:
//
//	<prefix>:<capability>:<region>:<kind>:v1:<digest>
//
// where digest is the unpadded base64url (43 characters) HMAC-SHA256, under a
// secret of at least 32 bytes, of the fields Domain, capability, region, kind
// and the caller's fields, each preceded by its byte length as an unsigned
// varint. Raw subjects, IPs, API keys and routes go into the digest only, so
// they never appear in a key. Anything that holds the secret redacts it in
// every textual form. The golden vectors in testdata/keys-v1.json pin the
// derivation: any change to it must be a new Version.
//
// Tagged keys (TaggedVersion v2, docs/adr/0003-key-format-v2.md) add a
// Redis Cluster hash tag derived from one field alone and shorten the
// digest to 128 bits:
//
//	<prefix>:<capability>:<region>:<kind>:v2:{<slot tag>}<digest>
//
// pinned by testdata/keys-v2.json. Rate-limit state uses them.
//
// Files: doc.go; builder.go (Builder, the v1 key format, its digest and
// segment rules); tagged.go (tagged keys: TaggedKey, SlotTag, SlotTagFor,
// Slot and the CRC16 of Redis Cluster); secret.go (Secret, its length
// rule and its redaction in every textual form).
//
// It must never import anything outside the Go standard library, and no other
// package of this module (ratelimit and cache build on it).
package keyspace
