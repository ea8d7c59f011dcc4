package coordserver

import (
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/grpc/codes"
)

// needFormat refuses, with FailedPrecondition LOG_FORMAT, what the
// replicated log format does not carry yet (a voter on an older build
// would halt on it): what is what needs it, e.g. "opening a session needs".
func (s *Server) needFormat(min uint32, what string) error {
	if f := s.logFormat(); f < min {
		return s.statusErr(codes.FailedPrecondition, ReasonLogFormat,
			fmt.Sprintf("%s log format %d, the cluster is at %d (every voter must be upgraded)", what, min, f))
	}
	return nil
}

// maxLogFormat is the newest log format a member with config cfg reads.
func maxLogFormat(cfg Config) uint32 {
	if cfg.maxLogFormat != 0 {
		return cfg.maxLogFormat
	}
	return fsm.CommandVersion
}

// logFormat is the format this member writes: the replicated one (never
// above what this build reads; the FSM halts before that could happen).
func (s *Server) logFormat() uint32 {
	var v uint32
	s.fsm.View(func(st *fsm.State) { v = st.LogFormat() })
	return min(v, maxLogFormat(s.cfg))
}

// upgradeLogFormat is the leader's half of the format upgrade: once every
// voter has registered a build that reads a newer format than the
// replicated one, it proposes SET_FORMAT with the newest format all of them
// read. Entries after it use that format; older entries and snapshots stay
// readable, and the next snapshot is written in the current encoding.
func (s *Server) upgradeLogFormat() {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	target := maxLogFormat(s.cfg)
	var cur uint32
	s.fsm.View(func(st *fsm.State) {
		cur = st.LogFormat()
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage != raft.Voter {
				continue
			}
			m, ok := st.Member(string(srv.ID))
			if !ok {
				target = 0 // not registered yet: wait
				return
			}
			target = min(target, max(m.MaxLogFormat, fsm.MinCommandVersion))
		}
	})
	if target <= cur {
		return
	}
	if _, err := s.applyCommand(fsmpb.CommandType_COMMAND_TYPE_SET_FORMAT, &fsmpb.SetFormatCommand{Version: target}); err != nil {
		s.log.Warn("raising the log format failed", "from", cur, "to", target, "err", err)
		return
	}
	s.log.Info("log format raised", "from", cur, "to", target)
}
