#!/usr/bin/env bash
# A local cluster with every member in its own process, to watch one fail:
# three `coord serve` and three `node serve`, on 127.0.0.1 with the ports
# `coord dev` uses. It prints each process's PID; kill one (kill -STOP to
# pause it, kill -CONT to resume, kill -9 to crash it) and watch `coord
# status`, `coord nodes` and a tail carry on. Ctrl-C stops them all.
#
#   bash deploy/local/cluster.sh            # data in a new temporary directory, removed on exit
#   DATA=/tmp/lb bash deploy/local/cluster.sh   # kept, and reused by the next run
#   NODES=0 bash deploy/local/cluster.sh    # coordinators only
#
# A member killed can be started again with the command printed for it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

nodes=${NODES:-3}
case "$nodes" in [0-8]) ;; *) echo "NODES=$nodes: want 0..8" >&2; exit 2 ;; esac
keep=1
data=${DATA:-}
if [ -z "$data" ]; then
	data=$(mktemp -d -t logbook-local.XXXXXX)
	keep=0
fi
bin="$data/bin"
mkdir -p "$bin"
echo "building coord and node into $bin" >&2
go build -o "$bin/coord" ./cmd/coord
go build -o "$bin/node" ./cmd/node

pids=()
stop() {
	trap - EXIT INT TERM
	echo "stopping ${#pids[@]} processes" >&2
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	if [ "$keep" = 0 ]; then rm -rf "$data"; else echo "data kept in $data" >&2; fi
}
trap stop EXIT INT TERM

endpoints=127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102
join=127.0.0.1:7200,127.0.0.1:7201,127.0.0.1:7202
start() { # name, command...
	local name=$1
	shift
	"$@" >>"$data/$name.log" 2>&1 &
	pids+=($!)
	printf '%-7s pid %-7s log %s\n        start again: %s\n' "$name" "$!" "$data/$name.log" "$* >>$data/$name.log 2>&1 &"
}
for i in 0 1 2; do
	id=coord$((i + 1))
	start "$id" "$bin/coord" serve --id "$id" --data-dir "$data/$id" \
		--raft-addr "127.0.0.1:700$i" --grpc-addr "127.0.0.1:710$i" --gossip-addr "127.0.0.1:720$i" --http-addr "127.0.0.1:730$i" \
		--bootstrap-expect 3 --join "$join"
done
for ((i = 0; i < nodes; i++)); do
	id=node$((i + 1))
	start "$id" "$bin/node" serve --id "$id" --data-dir "$data/$id" \
		--grpc-addr "127.0.0.1:740$i" --http-addr "127.0.0.1:750$i" --gossip-addr "127.0.0.1:760$i" \
		--coord-endpoints "$endpoints" --join "$join"
done

deadline=$((SECONDS + 60))
until "$bin/coord" health --ready --endpoints "$endpoints" >/dev/null 2>&1; do
	if [ $SECONDS -ge $deadline ]; then
		echo "the cluster is not ready after 60 s; see the logs in $data" >&2
		exit 1
	fi
	sleep 0.2
done
cat <<MSG

Logbook is running: 3 coordinators and $nodes storage nodes, each its own process.

  export LOGBOOK_ENDPOINTS=$endpoints
  $bin/coord status
  $bin/coord journal append app.hello hi && $bin/coord journal tail --follow &
  kill -9 <a coordinator's pid>      # then: coord status (it shows unreachable), appends go on

Ctrl-C stops every process.
MSG
wait
