#!/usr/bin/env bash
# members-down.sh: how long coord CLI commands take with a member down, on
# three `coord serve` processes (127.0.0.1, ports PORT+0..2 for Raft,
# PORT+100.. gRPC, PORT+200.. gossip, PORT+300.. HTTP). It times
# `journal positions`, `status`, `members` and `journal append` (medians
# of 5 runs, each a new process: connect, discover, call) with all up and
# with a follower killed (-9), once with every member in --endpoints and
# once with only the live ones; then, KILLS times, kills the leader and
# times the first `journal append` started right after, against the
# election (the new leader's "leader ready" log line).
# This makes the figures of docs/benchmarks.md, "Commands with members
# down".
#
# Usage: bash bench/members-down.sh [path/to/coord]   (default: a build of
#        this tree)
# Env:   KILLS (3), PORT (27000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

work=$(mktemp -d)
bin=${1:-}
if [ -z "$bin" ]; then
	go build -o "$work/coord" ./cmd/coord
	bin=$work/coord
fi
kills=${KILLS:-3}
port=${PORT:-27000}
pids=(0 0 0)
trap 'for p in "${pids[@]}"; do [ "$p" != 0 ] && kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"' EXIT

grpc() { echo "127.0.0.1:$((port + 100 + $1))"; }
start() {
	local i=$1
	"$bin" serve --id "c$i" --data-dir "$work/c$i" --raft-addr "127.0.0.1:$((port + i))" --grpc-addr "$(grpc "$i")" \
		--gossip-addr "127.0.0.1:$((port + 200 + i))" --http-addr "127.0.0.1:$((port + 300 + i))" --bootstrap-expect 3 \
		--join "127.0.0.1:$((port + 200)),127.0.0.1:$((port + 201)),127.0.0.1:$((port + 202))" >>"$work/c$i.log" 2>&1 &
	pids[i]=$!
}
eps="$(grpc 0),$(grpc 1),$(grpc 2)"
healthy() { # the number of healthy members per status
	"$bin" status --endpoints "$eps" --json 2>/dev/null | python3 -c 'import json,sys; print(sum(m["healthy"] for m in json.load(sys.stdin)["members"]))' 2>/dev/null || echo 0
}
leader() { "$bin" status --endpoints "$eps" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader"])'; }
ms() { # ms CMD...: wall time of one run, in ms
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$work/err" || { echo "failed: $* $(cat "$work/err")" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
med() { # med CMD...: the median of 5 runs
	local i
	for i in 1 2 3 4 5; do ms "$@"; done | sort -n | sed -n 3p
}
row() { # row LABEL ENDPOINTS
	printf '| %s | %s | %s | %s | %s |\n' "$1" "$(med "$bin" journal positions --endpoints "$2")" \
		"$(med "$bin" status --endpoints "$2")" "$(med "$bin" members --endpoints "$2")" \
		"$(med "$bin" journal append --endpoints "$2" --type t --payload x)"
}

for i in 0 1 2; do start "$i"; done
deadline=$((SECONDS + 60))
until [ "$(healthy)" = 3 ]; do
	[ $SECONDS -lt $deadline ] || { echo "cluster not healthy" >&2; cat "$work"/c*.log >&2; exit 1; }
	sleep 0.2
done
"$bin" journal append --endpoints "$eps" --type t --payload x >/dev/null
l=$(leader)
f=0
[ "$l" = c0 ] && f=1
live=""
for i in 0 1 2; do [ "$i" != "$f" ] && live="$live,$(grpc "$i")"; done
live=${live#,}
echo "| ms, median of 5 | journal positions | status | members | journal append |"
echo "|---|---|---|---|---|"
row "all up" "$eps"
kill -9 "${pids[f]}"
wait "${pids[f]}" 2>/dev/null || true
row "follower c$f killed, all 3 in --endpoints" "$eps"
row "follower c$f killed, the 2 live in --endpoints" "$live"
start "$f"

for k in $(seq "$kills"); do
	deadline=$((SECONDS + 60))
	until [ "$(healthy)" = 3 ]; do
		[ $SECONDS -lt $deadline ] || { echo "cluster not healthy again" >&2; exit 1; }
		sleep 0.2
	done
	l=$(leader)
	i=${l#c}
	t0=$(date +%s%3N)
	kill -9 "${pids[i]}"
	d=$(ms "$bin" journal append --endpoints "$eps" --type t --payload x)
	wait "${pids[i]}" 2>/dev/null || true
	ready=$(python3 - "$work" "$t0" <<'PY'
import datetime, glob, sys
work, t0 = sys.argv[1], int(sys.argv[2])
best = None
for f in glob.glob(work + "/c*.log"):
    for line in open(f):
        if 'msg="leader ready"' in line:
            ts = datetime.datetime.strptime(line.split()[0][5:], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
            t = int(ts.timestamp() * 1000)
            if t >= t0 and (best is None or t < best):
                best = t
print(best - t0 if best else -1)
PY
)
	echo "leader kill $k ($l): new leader ready ${ready} ms after the kill; first journal append started right after the kill took ${d} ms"
	start "$i"
done
