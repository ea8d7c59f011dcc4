// Package portprobe checks whether a loopback port is free to listen on.
package portprobe

import (
	"net"
	"strconv"
)

// Free reports whether 127.0.0.1:port can be listened on right now (over
// TCP, and UDP as well when udp is set: gossip listens on both).
func Free(port int, udp bool) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	if udp {
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		u.Close()
	}
	return true
}
