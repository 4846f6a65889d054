package send

// Sent is what the send loop reports about one program call, exactly one
// of: NotSent (nothing of it reached a server), MayHaveRun (it may have
// been written and no reply came: the program may have run) and replied
// (the server answered the last command sent, with a value or an error
// reply). outcome maps each variant; nothing else is reported.
//
//sumtype:decl
type Sent interface{ sentResult() }

// Reason says why a call was not sent.
type Reason int

// The reasons a call is not sent.
const (
	// ReasonDeadline: too little of the caller's deadline was left when
	// its turn came (queued for a batch, or NOSCRIPT with no time for
	// the EVAL), or the caller had gone.
	ReasonDeadline Reason = iota + 1
	// ReasonBreakerOpen: the target's circuit breaker is open.
	ReasonBreakerOpen
	// ReasonInFlight: the target already has its in-flight bound of calls
	// on the wire (loop.go).
	ReasonInFlight
	// ReasonPreSend: an error before any byte of the command was
	// serialized (pool, dial, handshake, a target that failed
	// qualification, a slot no primary serves).
	ReasonPreSend
)

// NotSent: nothing of the call reached a server; cause says what stopped it.
type NotSent struct {
	Reason Reason
	Cause  error
	// Command is the command that was about to be sent.
	Command string
}

// MayHaveRun: go-redis began writing the last command and no reply was
// read (timeout, connection lost, cancelled): the program may have run.
type MayHaveRun struct {
	Cause   error
	Command string
}

// Replied: the server answered the last command sent. err is its error
// reply (or redis.Nil), else reply is the program's reply. acked and
// ackErr are WAIT's answer when replication acks are required.
type Replied struct {
	Reply   any
	Err     error
	Command string
	Acked   int64
	AckErr  error
}

func (NotSent) sentResult()    {}
func (MayHaveRun) sentResult() {}
func (Replied) sentResult()    {}
