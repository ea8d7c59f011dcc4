package coordserver

import (
	"github.com/hashicorp/raft"
	"github.com/logbookhq/logbook/fsm/fsmpb"
	"google.golang.org/protobuf/proto"
)

// applyCommand proposes one non-append command on the leader and returns
// the state machine's response, its errors as gRPC statuses. Followers
// reach it through the forward interceptor.
func (s *Server) applyCommand(t fsmpb.CommandType, m proto.Message) (any, error) {
	resp, err := s.apply(t, m)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return resp, nil
}

// apply is applyCommand with the domain's and Raft's errors as they are.
func (s *Server) apply(t fsmpb.CommandType, m proto.Message) (any, error) {
	if s.raft.State() != raft.Leader {
		return nil, raft.ErrNotLeader
	}
	data, err := s.encode(t, m)
	if err != nil {
		return nil, err
	}
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	if err := s.await(f); err != nil {
		return nil, err
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

func (s *Server) applyMember(m *fsmpb.Member) error {
	data, err := s.encode(fsmpb.CommandType_COMMAND_TYPE_REGISTER_MEMBER, &fsmpb.RegisterMemberCommand{Member: m})
	if err != nil {
		return err
	}
	f := s.raft.Apply(data, s.cfg.ApplyTimeout)
	if err := s.await(f); err != nil {
		return err
	}
	if err, _ := f.Response().(error); err != nil {
		return err
	}
	return nil
}
