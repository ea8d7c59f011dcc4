package nodeserver

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/logbookhq/logbook/membership"
)

// startGossip joins the coordinators' gossip (Config.Join) as a storage
// node once the first registration told it the cluster id, so the
// coordinators' failure detector sees it fail in seconds (their liveness
// combines it with heartbeats). Without Join it does nothing. It is called
// from the link's goroutine only.
func (s *Server) startGossip(clusterID string) {
	if len(s.cfg.Join) == 0 || s.gossip != nil || clusterID == "" {
		return
	}
	mc := membership.DefaultConfig()
	mc.BindAddr = s.cfg.GossipAddr
	mc.ClusterID = clusterID
	mc.Join = s.cfg.Join
	mc.Logger = s.log.With("component", "gossip")
	mc.Keyring = s.keyring
	if a := s.cfg.AdvertiseGossip; a != "" {
		ip, err := resolveIPPort(a)
		if err != nil {
			s.log.Warn("gossip: advertise address not resolvable; advertising the bound one", "advertise-gossip", a, "error", err)
		} else {
			mc.AdvertiseAddr = ip
		}
	}
	mc.Meta = membership.Meta{
		Role: membership.RoleNode, ID: s.cfg.ID, ClusterID: clusterID,
		GRPCAddr: s.AdvertisedGRPC(), HTTPAddr: advertised(s.HTTPAddr(), s.cfg.AdvertiseHTTP),
	}
	m, err := membership.New(mc)
	if err != nil {
		s.log.Error("gossip: cannot start; liveness falls back to heartbeats alone", "error", err)
		return
	}
	s.gossipMu.Lock()
	s.gossip = m
	s.gossipMu.Unlock()
	s.log.Info("gossip started", "cluster-id", clusterID, "addr", m.LocalAddr(), "join", s.cfg.Join)
}

// stopGossip leaves the gossip gracefully (peers see "left", not "dead").
func (s *Server) stopGossip(graceful bool) {
	s.gossipMu.Lock()
	m := s.gossip
	s.gossip = nil
	s.gossipMu.Unlock()
	if m == nil {
		return
	}
	if graceful {
		_ = m.Leave(time.Second)
	}
	_ = m.Close()
}

// resolveIPPort turns host:port into ip:port (memberlist advertises IPs).
func resolveIPPort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil {
		return addr, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", err
	}
	for _, ip := range ips {
		if v4 := ip.IP.To4(); v4 != nil {
			return net.JoinHostPort(v4.String(), port), nil
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("%s: no addresses", host)
	}
	p, _ := strconv.Atoi(port)
	return net.JoinHostPort(ips[0].IP.String(), strconv.Itoa(p)), nil
}
