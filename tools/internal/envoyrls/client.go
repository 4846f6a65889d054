package envoyrls

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ClientWait bounds one client_cmd run.
const ClientWait = 15 * time.Second

// Entry is one key=value of a descriptor.
type Entry struct {
	Key   string
	Value string
}

// Descriptor is an ordered list of entries.
type Descriptor []Entry

// D builds a descriptor from alternating keys and values.
func D(kv ...string) Descriptor {
	if len(kv)%2 != 0 {
		panic("envoyrls.D: odd number of keys and values")
	}
	d := make(Descriptor, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		d = append(d, Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// Flag is the descriptor in client_cmd's -descriptors form:
// key=value,key=value.
func (d Descriptor) Flag() string {
	parts := make([]string, len(d))
	for i, e := range d {
		parts[i] = e.Key + "=" + e.Value
	}
	return strings.Join(parts, ",")
}

// Proto is the descriptor as the envoy message; hits, when not nil, is its
// own hits_addend (0 is a check that consumes nothing).
func (d Descriptor) Proto(hits *uint64) *ratelimitv3.RateLimitDescriptor {
	out := &ratelimitv3.RateLimitDescriptor{Entries: make([]*ratelimitv3.RateLimitDescriptor_Entry, len(d))}
	for i, e := range d {
		out.Entries[i] = &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
	}
	if hits != nil {
		out.HitsAddend = wrapperspb.UInt64(*hits)
	}
	return out
}

// Request builds a ShouldRateLimit request of the descriptors (hits_addend
// unset: each counts 1).
func Request(domain string, ds ...Descriptor) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain}
	for _, d := range ds {
		req.Descriptors = append(req.Descriptors, d.Proto(nil))
	}
	return req
}

// RunClient runs the reference's client_cmd once against addr (it always
// sends hits_addend 1) and returns the response it printed.
func RunClient(ctx context.Context, bin, addr, domain string, ds ...Descriptor) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, ClientWait)
	defer cancel()
	args := []string{"-dial_string", addr, "-domain", domain}
	for _, d := range ds {
		args = append(args, "-descriptors", d.Flag())
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = baseEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("envoyrls: client_cmd %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return ParseClientOutput(out)
}

// ParseClientOutput finds client_cmd's "response: <text proto>" line and
// decodes it.
func ParseClientOutput(out []byte) (*rlsv3.RateLimitResponse, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		text, ok := strings.CutPrefix(line, "response: ")
		if !ok {
			continue
		}
		resp := &rlsv3.RateLimitResponse{}
		if err := prototext.Unmarshal([]byte(text), resp); err != nil {
			return nil, fmt.Errorf("envoyrls: client_cmd response %q: %w", text, err)
		}
		return resp, nil
	}
	return nil, fmt.Errorf("envoyrls: client_cmd printed no response line:\n%s", tail(string(out), 1000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// Client is a Go gRPC client of envoy.service.ratelimit.v3.
type Client struct {
	conn *grpc.ClientConn
	rls  rlsv3.RateLimitServiceClient
}

// Dial connects (lazily, plaintext) to a rate limit service on addr.
func Dial(addr string) (*Client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("envoyrls: dial %s: %w", addr, err)
	}
	return &Client{conn: conn, rls: rlsv3.NewRateLimitServiceClient(conn)}, nil
}

// ShouldRateLimit sends one request.
func (c *Client) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := c.rls.ShouldRateLimit(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("envoyrls: ShouldRateLimit: %w", err)
	}
	return resp, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Codes is a response's overall code followed by each descriptor's code,
// the part of a response both services must agree on.
func Codes(resp *rlsv3.RateLimitResponse) []rlsv3.RateLimitResponse_Code {
	out := []rlsv3.RateLimitResponse_Code{resp.GetOverallCode()}
	for _, s := range resp.GetStatuses() {
		out = append(out, s.GetCode())
	}
	return out
}

// ErrNotJSON is wrapped when /json's reply is not a response.
var ErrNotJSON = errors.New("envoyrls: /json reply is not a rate limit response")
