package subject

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// FuzzParseAPIKeyDigests: any keys file is either 1..MaxAPIKeys digests,
// each written in the file as 64 hex digits on its own line, or an error
// wrapping ErrInvalidConfig that echoes no line of the file (a line may be
// a raw key pasted by mistake). It never panics.
// keysErrRe is every shape a ParseAPIKeyDigests error may take.
var keysErrRe = regexp.MustCompile(`^invalid subject config: (larger than \d+ bytes|line \d+: want a SHA-256 digest of 64 hex digits(, got \d+ characters|: not hex)|line \d+: more than \d+ digests|line \d+ is too long|no digest \(every request would get 401\))$`)

func FuzzParseAPIKeyDigests(f *testing.F) {
	for _, s := range []string{
		DigestAPIKey("a").String() + "\n",
		"# comment\n\n  " + strings.ToUpper(DigestAPIKey("b").String()) + "  \r\n" + DigestAPIKey("c").String(),
		"raw-secret-key-pasted-by-mistake-0123456789\n",
		DigestAPIKey("a").String()[:63] + "g\n",
		"",
		"#",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseAPIKeyDigests(strings.NewReader(string(data)))
		text := strings.ToLower(string(data))
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error does not wrap ErrInvalidConfig: %v", err)
			}
			if got != nil {
				t.Fatalf("an error with %d digests", len(got))
			}
			// The error has a fixed shape (line numbers and counts only),
			// so it cannot echo a line of the file.
			if !keysErrRe.MatchString(err.Error()) {
				t.Fatalf("the error is not one of the fixed shapes: %v", err)
			}
			return
		}
		if len(got) == 0 || len(got) > MaxAPIKeys {
			t.Fatalf("%d digests, want 1..%d", len(got), MaxAPIKeys)
		}
		for i, d := range got {
			if !strings.Contains(text, d.String()) {
				t.Fatalf("digest %d (%s) is not a line of the file", i, d)
			}
		}
	})
}
