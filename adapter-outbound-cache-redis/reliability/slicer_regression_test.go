package reliability_test

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/stretchr/testify/require"
)

// TestSlicerInterruptedWithNoReader is the regression test of the
// toxiproxy deadlock slicerToxic avoids: with nobody left to read its
// output (the link's writer gone with its client), the slicer must still
// take an interrupt, as RemoveToxic needs, within a bound. Toxiproxy's own
// slicer (toxics.SlicerToxic) blocks in its send and never takes it.
func TestSlicerInterruptedWithNoReader(t *testing.T) {
	testSlicerInterrupt(t, &slicerToxic{AverageSize: 1, Delay: 1000})
}

func testSlicerInterrupt(t *testing.T, toxic toxics.Toxic) {
	in := make(chan *stream.StreamChunk, 1)
	out := make(chan *stream.StreamChunk) // never read
	stub := toxics.NewToxicStub(in, out)
	go stub.Run(&toxics.ToxicWrapper{Toxic: toxic, Toxicity: 1})
	in <- &stream.StreamChunk{Data: []byte("a reply still being sliced"), Timestamp: time.Now()}

	interrupted := make(chan bool, 1)
	go func() { interrupted <- stub.InterruptToxic() }()
	select {
	case ok := <-interrupted:
		require.True(t, ok, "the stub was interrupted, not closed")
	case <-time.After(flushTimeout + 5*time.Second):
		t.Fatalf("%T took no interrupt within %v while its output had no reader", toxic, flushTimeout+5*time.Second)
	}
}

// TestSlicerThroughProxy checks the lane's slicer in a real proxy: a
// client that leaves part-way through a slowly sliced reply, the toxic
// removed after it, and a new connection's traffic carried whole.
func TestSlicerThroughProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	proxy := startProxy(t, ln.Addr().String())
	remove := addToxic(t, proxy, `{"type":"tlb_slicer","stream":"downstream","attributes":{"average_size":1,"size_variation":0,"delay":20000}}`)

	c, err := net.DialTimeout("tcp", proxy.Listen, time.Second)
	require.NoError(t, err)
	_, err = c.Write([]byte(strings.Repeat("x", 64) + "\n"))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(c, make([]byte, 2)) // two one-byte slices came; the rest is still being sliced
	require.NoError(t, err)
	require.NoError(t, c.Close())
	remove()

	c2, err := net.DialTimeout("tcp", proxy.Listen, time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	require.NoError(t, c2.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c2.Write([]byte("after\n"))
	require.NoError(t, err)
	got, err := bufio.NewReader(c2).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "after\n", got)
}
