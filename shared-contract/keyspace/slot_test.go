package keyspace

import "testing"

func TestSlot(t *testing.T) {
	t.Parallel()
	// CRC-16/XMODEM check value, and the examples of the cluster spec.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16 check value %#x, want 0x31C3", got)
	}
	if crc16([]byte("123456789")) != crc16("123456789") {
		t.Fatal("crc16 differs for string and []byte")
	}
	for _, tt := range []struct {
		key, hashed, why string
	}{
		{"{user1000}.following", "user1000", "the tag is hashed"},
		{"foo{bar}{zap}", "bar", "only the first tag counts"},
		{"foo{}{bar}", "foo{}{bar}", "empty tag: the whole key is hashed"},
		{"{bar", "{bar", "an unclosed brace is no tag"},
		{"plain", "plain", "no tag"},
	} {
		if got, want := Slot(tt.key), int(crc16(tt.hashed)%ClusterSlots); got != want {
			t.Errorf("Slot(%q) = %d, want %d (%s)", tt.key, got, want, tt.why)
		}
	}
}
