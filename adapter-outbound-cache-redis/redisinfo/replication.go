package redisinfo

import (
	"fmt"
	"strconv"
	"strings"
)

// Roles as INFO replication's role field reports them.
const (
	RolePrimary = "master"
	RoleReplica = "slave"
)

// Replication is what an INFO replication reply says about a server: its
// role, a replica's link to its primary, and a primary's replicas.
type Replication struct {
	// Role is RolePrimary or RoleReplica.
	Role string
	// LinkUp: a replica's master_link_status is up (false on a primary).
	LinkUp bool
	// Offset is master_repl_offset: the replication offset the server has
	// reached (a primary: written; a replica: received).
	Offset int64
	// Replicas are a primary's slave0, slave1, ... lines, in order.
	Replicas []Replica
}

// Replica is one slave<N> line of a primary's INFO replication.
type Replica struct {
	IP   string
	Port int
	// State is "online" once the replica streams the primary's writes
	// ("wait_bgsave", "send_bulk" before).
	State string
	// Offset is the replication offset the replica has acknowledged.
	Offset int64
	// Lag is the seconds since the replica's last acknowledgement, -1 when
	// the line has none.
	Lag int64
}

// ReplicaOnline is Replica.State once a replica streams its primary's writes.
const ReplicaOnline = "online"

// ParseReplication reads an INFO replication reply (other sections may
// surround it). A missing role or master_repl_offset, or a figure that is
// not a number, is an error wrapping ErrMalformed.
func ParseReplication(text string) (Replication, error) {
	fields := Parse(text)
	r := Replication{Role: fields["role"], LinkUp: fields["master_link_status"] == "up"}
	if r.Role == "" {
		return r, fmt.Errorf("%w: no role field", ErrMalformed)
	}
	offset, ok := fields["master_repl_offset"]
	if !ok {
		return r, fmt.Errorf("%w: no master_repl_offset field", ErrMalformed)
	}
	var err error
	if r.Offset, err = strconv.ParseInt(offset, 10, 64); err != nil {
		return r, fmt.Errorf("%w: master_repl_offset %q is not a number", ErrMalformed, bounded(offset))
	}
	r.Replicas, err = replicas(fields)
	return r, err
}

// Replicas returns the slave0, slave1, ... lines of a primary's INFO
// replication reply, in order (none on a replica). A figure that is not a
// number is an error wrapping ErrMalformed.
func Replicas(text string) ([]Replica, error) { return replicas(Parse(text)) }

func replicas(fields map[string]string) ([]Replica, error) {
	var out []Replica
	for i := 0; ; i++ {
		name := "slave" + strconv.Itoa(i)
		line, ok := fields[name]
		if !ok {
			return out, nil
		}
		rep, err := parseReplica(line)
		if err != nil {
			return out, fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
		}
		out = append(out, rep)
	}
}

// Online returns the number of replicas whose state is ReplicaOnline.
func (r Replication) Online() int {
	n := 0
	for _, rep := range r.Replicas {
		if rep.State == ReplicaOnline {
			n++
		}
	}
	return n
}

// CaughtUp reports whether at least one online replica has acknowledged
// the primary's whole offset.
func (r Replication) CaughtUp() bool {
	for _, rep := range r.Replicas {
		if rep.State == ReplicaOnline && rep.Offset == r.Offset {
			return true
		}
	}
	return false
}

// parseReplica reads "ip=...,port=...,state=...,offset=...,lag=...".
func parseReplica(line string) (Replica, error) {
	rep := Replica{Lag: -1}
	for kv := range strings.SplitSeq(line, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "ip":
			rep.IP = v
		case "port":
			rep.Port, err = strconv.Atoi(v)
		case "state":
			rep.State = v
		case "offset":
			rep.Offset, err = strconv.ParseInt(v, 10, 64)
		case "lag":
			rep.Lag, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			return Replica{}, fmt.Errorf("%s=%q is not a number", k, bounded(v))
		}
	}
	return rep, nil
}

// ClusterInfo is the figures of a CLUSTER INFO reply (the same name:value
// text as INFO).
type ClusterInfo struct {
	// State is "ok" or "fail".
	State string
	// SlotsAssigned, SlotsOK, SlotsPFail and SlotsFail count hash slots.
	SlotsAssigned, SlotsOK, SlotsPFail, SlotsFail int
	// KnownNodes counts the nodes this node knows, itself included.
	KnownNodes int
}

// ClusterStateOK is ClusterInfo.State when the node serves every slot.
const ClusterStateOK = "ok"

// ParseClusterInfo reads a CLUSTER INFO reply. A missing cluster_state, or
// a missing or non-numeric slot or node count, is an error wrapping
// ErrMalformed.
func ParseClusterInfo(text string) (ClusterInfo, error) {
	fields := Parse(text)
	ci := ClusterInfo{State: fields["cluster_state"]}
	if ci.State == "" {
		return ci, fmt.Errorf("%w: no cluster_state field", ErrMalformed)
	}
	for _, f := range []struct {
		name string
		into *int
	}{
		{"cluster_slots_assigned", &ci.SlotsAssigned},
		{"cluster_slots_ok", &ci.SlotsOK},
		{"cluster_slots_pfail", &ci.SlotsPFail},
		{"cluster_slots_fail", &ci.SlotsFail},
		{"cluster_known_nodes", &ci.KnownNodes},
	} {
		n, err := strconv.Atoi(fields[f.name])
		if err != nil {
			return ci, fmt.Errorf("%w: %s %q is not a number", ErrMalformed, f.name, bounded(fields[f.name]))
		}
		*f.into = n
	}
	return ci, nil
}
