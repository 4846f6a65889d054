package subject_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

// An embedder whose own authentication middleware put the user in the
// request context limits by that user.
func ExampleIdentifierFunc() {
	type userKey struct{}
	ids := subject.IdentifierFunc(func(r *http.Request) (subject.Identity, error) {
		user, ok := r.Context().Value(userKey{}).(string)
		if !ok {
			return subject.Identity{}, subject.ErrUnauthenticated
		}
		return subject.NewPrincipal(user)
	})

	anonymous := httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil)
	_, err := ids.Identify(anonymous)
	fmt.Println(subject.ErrorStatus(err))

	alice := anonymous.WithContext(context.WithValue(anonymous.Context(), userKey{}, "alice"))
	id, _ := ids.Identify(alice)
	fmt.Println(id.Kind(), id) // the value never prints
	// Output:
	// 401 unauthenticated
	// principal subject.Identity(principal, [redacted])
}

// Verified API keys in front of a handler: the keys file holds only SHA-256
// digests; an unknown key is refused before anything behind Require runs.
func ExampleRequire() {
	file := "# accepted keys\n" + subject.DigestAPIKey("k-7f3a9c").String() + "\n"
	digests, err := subject.ParseAPIKeyDigests(strings.NewReader(file))
	if err != nil {
		panic(err)
	}
	keys, err := subject.NewAPIKeys(digests)
	if err != nil {
		panic(err)
	}
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := subject.FromContext.Identify(r) // what a limiter behind Require reads
		fmt.Fprint(w, id.Kind())
	})
	h := subject.Require(keys, limited)
	for _, key := range []string{"k-7f3a9c", "invented"} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil)
		req.Header.Set(subject.APIKeyHeader, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Body.String())
	}
	// Output:
	// 200 api_key
	// 401 {"type":"about:blank","title":"unauthenticated","status":401}
}
