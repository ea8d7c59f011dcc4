package coordserver

import (
	"fmt"
	"net"
	"strconv"

	"github.com/logbookhq/logbook/internal/portprobe"
)

// CoordinatorAddrs are one coordinator's listen addresses.
type CoordinatorAddrs struct{ Raft, GRPC, Gossip, HTTP string }

// NodeAddrs are one storage node's listen addresses ("127.0.0.1:0" for
// gRPC or HTTP: a free port the node picks).
type NodeAddrs struct{ GRPC, HTTP, Gossip string }

// Ports gives a Cluster's members their addresses, asked for in order:
// coordinator (or node) 0 first.
type Ports struct {
	Coordinator func(i int) (CoordinatorAddrs, error)
	Node        func(i int) (NodeAddrs, error)
}

// PortsFrom gives every listener the address next returns (udp: the
// address must be free for UDP too, a gossip port).
func PortsFrom(next func(udp bool) string) Ports {
	return Ports{
		Coordinator: func(int) (CoordinatorAddrs, error) {
			return CoordinatorAddrs{Raft: next(false), GRPC: next(false), Gossip: next(true), HTTP: next(false)}, nil
		},
		Node: func(int) (NodeAddrs, error) {
			return NodeAddrs{GRPC: next(false), HTTP: next(false), Gossip: next(true)}, nil
		},
	}
}

// DevPorts are coord dev's: coordinator 0 on DefaultConfig's ports, so
// every CLI command works without flags, each later one on the next free
// port above each default (TCP, and UDP too for gossip); storage nodes from
// gRPC 7400, HTTP 7500 and gossip 7600 up.
func DevPorts() Ports {
	d := DefaultConfig()
	base := [4]int{portOf(d.RaftAddr), portOf(d.GRPCAddr), portOf(d.GossipAddr), portOf(d.HTTPAddr)}
	used := map[int]bool{}
	for _, p := range base {
		used[p] = true
	}
	next := func(from int, udp bool) (string, error) {
		for p := from; p <= 65535 && p <= from+1000; p++ {
			if !used[p] && portprobe.Free(p, udp) {
				used[p] = true
				return loopback(p), nil
			}
		}
		return "", fmt.Errorf("no free port from %d", from)
	}
	return Ports{
		Coordinator: func(i int) (CoordinatorAddrs, error) {
			if i == 0 {
				return CoordinatorAddrs{Raft: loopback(base[0]), GRPC: loopback(base[1]), Gossip: loopback(base[2]), HTTP: loopback(base[3])}, nil
			}
			var a [4]string
			for k, p := range base {
				var err error
				if a[k], err = next(p+1, k == 2); err != nil {
					return CoordinatorAddrs{}, err
				}
			}
			return CoordinatorAddrs{Raft: a[0], GRPC: a[1], Gossip: a[2], HTTP: a[3]}, nil
		},
		Node: func(int) (NodeAddrs, error) {
			var a [3]string
			for k, p := range [3]int{7400, 7500, 7600} {
				var err error
				if a[k], err = next(p, k == 2); err != nil {
					return NodeAddrs{}, err
				}
			}
			return NodeAddrs{GRPC: a[0], HTTP: a[1], Gossip: a[2]}, nil
		},
	}
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// portOf is the port of a host:port DefaultConfig holds.
func portOf(addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		panic(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		panic(err)
	}
	return n
}
