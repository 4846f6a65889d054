package wiring

// The golden renderings of the example policies' programs under
// testdata/programs (what the service sends for them, ADR 0035) are
// rewritten by go generate; TestExamplePolicyPrograms fails when they drift.
//go:generate go test -run TestExamplePolicyPrograms -update-programs .
