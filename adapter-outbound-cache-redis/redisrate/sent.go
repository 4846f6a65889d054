package redisrate

// sent is what the send loop reports about one program call, exactly one
// of: notSent (nothing of it reached a server), mayHaveRun (it may have
// been written and no reply came: the program may have run) and replied
// (the server answered the last command sent, with a value or an error
// reply). outcome maps each variant; nothing else is reported.
//
//sumtype:decl
type sent interface{ sentResult() }

// notSentReason says why a call was not sent.
type notSentReason int

// The reasons a call is not sent.
const (
	// reasonDeadline: too little of the caller's deadline was left when
	// its turn came (queued for a batch, or NOSCRIPT with no time for
	// the EVAL), or the caller had gone.
	reasonDeadline notSentReason = iota + 1
	// reasonBreakerOpen: the target's circuit breaker is open.
	reasonBreakerOpen
	// reasonInFlight: MaxInFlight calls are already in flight.
	reasonInFlight
	// reasonPreSend: an error before any byte of the command was
	// serialized (pool, dial, handshake, a target that failed
	// qualification, a slot no primary serves).
	reasonPreSend
)

// notSent: nothing of the call reached a server; cause says what stopped it.
type notSent struct {
	reason notSentReason
	cause  error
	// command is the command that was about to be sent.
	command string
}

// mayHaveRun: go-redis began writing the last command and no reply was
// read (timeout, connection lost, cancelled): the program may have run.
type mayHaveRun struct {
	cause   error
	command string
}

// replied: the server answered the last command sent. err is its error
// reply (or redis.Nil), else reply is the program's reply. acked and
// ackErr are WAIT's answer when replication acks are required.
type replied struct {
	reply   any
	err     error
	command string
	acked   int64
	ackErr  error
}

func (notSent) sentResult()    {}
func (mayHaveRun) sentResult() {}
func (replied) sentResult()    {}
