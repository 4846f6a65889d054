// Package route owns the grammar of the routes a policy is mapped to: a
// route is a net/http ServeMux pattern ("POST /api/v1/login", "GET /api/"),
// and a set of routes must hold no pattern ServeMux refuses (malformed, or
// conflicting with an earlier one). The policy file's parser
// (app-bootstrap/config) and the HTTP edge's route table
// (adapter-inbound-web/edge) both build a Table, so a policy file is
// refused when it is read by the rule the edge would refuse it by (ADR
// 0033).
//
// It imports only the standard library: no adapter, no app-bootstrap.
package route
