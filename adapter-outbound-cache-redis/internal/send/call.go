package send

import "time"

// Call is one program call as the caller describes it: Executor.Run sends
// it for one key (and a dedup program's second), Executor.RunSet for the
// keys of a policy set. The send package never knows a program's ARGV
// layout: the caller, which builds the ARGV with the programs package,
// names the entries its per-call values replace.
//
// A policy's ARGV is built once and shared by every call of the policy, so
// it is never written: the executor sends it with Cost and EvalID in place
// (through pointers into its pooled per-call storage, so building the
// command allocates nothing). The zero Call is not a call: Script is
// required.
type Call struct {
	// Script is the program to send (EVALSHA of its digest, one EVAL of
	// its source on NOSCRIPT).
	Script *Script
	// Key is KEYS[1], the state key, and picks the target (Run).
	Key string
	// DedupKey, when not "", is KEYS[2]: a dedup program's hash, in Key's
	// slot (Run).
	DedupKey string
	// Keys are every KEYS entry of a call over several keys (RunSet):
	// Keys[0] picks the target, and every key shares its slot. Run
	// ignores it.
	Keys []string
	// Argv is the program's ARGV, sent as given except for the two
	// entries below.
	Argv []any
	// Cost, when not 0, is sent in place of Argv[CostArg]: the caller's
	// index of the cost in its ARGV (programs.ArgCost).
	Cost    int64
	CostArg int
	// EvalID, when not "", is sent in place of Argv[EvalIDArg]: the
	// caller's index of a dedup program's evaluation ID in its ARGV.
	EvalID    string
	EvalIDArg int
	// SendBy is the latest time a command of the call may be sent: the
	// loop follows no refusal after it.
	SendBy time.Time
	// Pre (optional, Run only) is a charge sent ahead of the program on
	// the same connection, with the first attempt only (precharge.go).
	Pre *PreCharge
}
