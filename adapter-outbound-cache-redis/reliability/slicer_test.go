package reliability_test

import (
	mrand "math/rand/v2"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// slicerType is the toxic type the lane slices streams with: toxiproxy's
// "slicer" (same attributes) whose every send can be interrupted.
//
// Toxiproxy v2.5.0's own slicer sends each slice with a plain blocking
// channel send. When the client closes a connection part-way through a
// sliced reply (a command timeout), the link's writer exits and the slicer
// blocks forever on its next send; RemoveToxic then waits for it while
// holding the proxy's toxic-collection lock, which the dying link needs:
// a deadlock that hung TestRandomizedFaultRuns until the 10-minute test
// timeout (upstream Shopify/toxiproxy#558, #427; no fixed release on the
// module proxy).
const slicerType = "tlb_slicer"

// flushTimeout bounds the forwarding of a slice's remainder once the toxic
// is interrupted: a live link takes it at once, a dead one never does.
const flushTimeout = time.Second

// slicerToxic splits every chunk into slices of AverageSize ± SizeVariation
// bytes, Delay microseconds apart.
type slicerToxic struct {
	AverageSize   int `json:"average_size"`
	SizeVariation int `json:"size_variation"`
	Delay         int `json:"delay"`
}

func init() { toxics.Register(slicerType, new(slicerToxic)) }

// Pipe forwards stub's input in slices until interrupted or closed.
func (t *slicerToxic) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !t.slice(stub, c) {
				return
			}
		}
	}
}

// slice forwards c in slices; false when interrupted, after forwarding the
// rest of c within flushTimeout (dropped when the link is gone).
func (t *slicerToxic) slice(stub *toxics.ToxicStub, c *stream.StreamChunk) bool {
	data := c.Data
	for len(data) > 0 {
		n := min(len(data), t.size())
		select {
		case stub.Output <- &stream.StreamChunk{Data: data[:n], Timestamp: c.Timestamp}:
			data = data[n:]
		case <-stub.Interrupt:
			_ = stub.WriteOutput(&stream.StreamChunk{Data: data, Timestamp: c.Timestamp}, flushTimeout)
			return false
		}
		if len(data) == 0 {
			break
		}
		select {
		case <-stub.Interrupt:
			_ = stub.WriteOutput(&stream.StreamChunk{Data: data, Timestamp: c.Timestamp}, flushTimeout)
			return false
		case <-time.After(time.Duration(t.Delay) * time.Microsecond):
		}
	}
	return true
}

// size draws one slice length, at least 1.
func (t *slicerToxic) size() int {
	n := t.AverageSize
	if t.SizeVariation > 0 {
		n += mrand.IntN(2*t.SizeVariation+1) - t.SizeVariation
	}
	return max(n, 1)
}
