// Package leaserecovery holds the decision rules of lease recovery and block
// recovery (HDFS semantics, docs/design.md §R3–§R6 and §R9) as pure,
// deterministic functions: no I/O, no clock (time comes in as an argument),
// no randomness, no goroutines. Three callers share them:
//
//   - the coordinator's state machine at apply time (fsm): the same entry
//     must give the same answer on every member (invariant 2), so every
//     input is FSM state or carried in the entry;
//   - the Raft leader's lease monitor and report processing, which add the
//     leader's soft state (liveness, heartbeats, lease renewals, reported
//     replicas) as explicit inputs;
//   - the recovery primary's worker on a storage node.
//
// The package does not import replica/, fsm/ or gRPC: it declares its own
// small views (File, Block, ReplicaReply, ReportedReplica) and the wiring
// converts. ReplicaState has replica.State's values (HDFS ordinals).
//
// # Rules and their sections of docs/design.md
//
// Every § in this package is a section of docs/design.md's rules for
// replicas and recovery: §R3.2 there. The rule names of this package's
// table tests write the same sections without the R (§3.2 is §R3.2, §7.14
// is scenario 14 of §R7).
//
//	§R3.1         Config.SoftExpired, Config.HardExpired   lease limits
//	§R3.2         DecideRelease                            internalReleaseLease
//	§R3.3, §R9.1  ChoosePrimary, BeginRecovery             new attempt: id, primary, deadline
//	§R3.4         RecoveryLocations                        locations in the command (stale, dead)
//	§R3.5         CheckWriteAccess, AnswerRelease          competing writers, recoverLease
//	§R4.1         PlanRecovery, BuildCommit                the primary: participants, length, commit
//	§R4.2, §R9.4  CheckCommit                              commitBlockSynchronization at apply time
//	§R5.3         CheckUpdateBlockForPipeline,             pipeline recovery on the coordinator
//	              CheckUpdatePipeline
//	§R5.1, §R5.4  CheckCommitBlock, CanComplete, CanClose  commit, complete, close
//	§R6.2         ReconcileReplica                         one reported replica vs the stored block
//
// Every refusal is an *Error with a Kind (one gRPC code each, see ErrorKind)
// and a stable Reason. errors.Is matches kinds (ErrAborted) and
// &Error{Kind, Reason} targets.
//
// # The lifecycle of a recovery
//
// The lease monitor (hard limit) or a client (recoverLease; create/append
// after the soft limit, CheckWriteAccess) asks DecideRelease. On
// ReleaseStartRecovery the leader picks a primary with ChoosePrimary and
// proposes one entry that allocates the recovery id from the GS counter and
// applies BeginRecovery (state UNDER_RECOVERY, id, primary, attempt,
// chosen set, deadline = command time + RecoveryTimeout). The primary is
// sent {block, GS, length, recovery id, RecoveryLocations}; it calls
// initReplicaRecovery everywhere, PlanRecovery, updateReplicaUnderRecovery
// on the participants, BuildCommit, and commitBlockSynchronization, which
// the FSM checks with CheckCommit. When the deadline passes, the next
// DecideRelease answers ReleaseStartRecovery again: a new, higher id and the
// next primary; the old attempt's commit is then refused (KindAborted).
//
// # What Raft changes (§R9)
//
//   - Recovery state is FSM state (Block.Recovery): id, primary, attempt,
//     chosen set and deadline are replicated, so a new leader re-sends the
//     same recovery (same id) and a commit carrying it stays valid after a
//     failover (§R9.1, §R7.33).
//   - Fencing happens at apply time: CheckCommit, CheckUpdatePipeline and
//     CheckCommitBlock re-check the current state in the FSM. A recovery id
//     that is not the block's current one changes nothing (invariant 5);
//     checking only on the leader before proposing is not enough, since two
//     proposals can race (§R9.4).
//   - Recovery ids only grow: BeginRecovery refuses an id not above the
//     block's GS and current id (§R9.3).
//   - Timers are leader-local (§R9.6): lease renewals, heartbeats and the
//     decision to re-send a command are leader soft state, passed in as
//     arguments. The attempt deadline is replicated but its time comes from
//     the command that started the attempt; DecideRelease compares it with
//     the time of the command or monitor tick that asks.
//   - Commands are derived, not queued (§R9.11): the recovery work of node X
//     is every UNDER_RECOVERY block whose Recovery.Primary is X; any leader
//     derives the same list.
//   - Soft state the FSM needs travels in the entry (§R9.5): a command that
//     the FSM re-decides with DecideRelease carries the LiveReplicas counts
//     the leader saw; a recovery commit always completes the block, whatever
//     the replica count, so that decision needs no soft state.
//   - Reports are judged against applied state: ReconcileReplica queues a
//     report whose GS is above the GS counter, or one that looks corrupt
//     while the leader has not caught up (§R9.7, §R7.32).
package leaserecovery
