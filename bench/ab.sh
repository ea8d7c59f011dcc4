#!/usr/bin/env bash
# ab.sh: compare two coord builds (or two settings of one) on the journal's
# append path, in alternating runs: each run starts a fresh `coord dev
# --nodes 0` (3 coordinators), gives it WARM seconds of unmeasured load,
# then measures SECS seconds of `coord bench journal` and reads the
# members' /metrics and CPU before and after. Runs alternate A B, B A, A B,
# ... so that a machine that speeds up or slows down during the set
# weighs on both sides alike; the medians of each side end the output.
# This is how the "alternating runs" of docs/benchmarks.md are made: on
# these machines single runs move by ±10–25%, so compare medians of
# several pairs, never one run against another.
#
# Usage: A=/path/to/coord-a B=/path/to/coord-b bash bench/ab.sh [pairs]
#        (default 3 pairs; A and B default to a build of this tree, which
#        measures the noise)
# Env:   A_ENV, B_ENV: environment assignments for that side's coord dev,
#          e.g. B_ENV="GOGC=200"
#        A_FLAGS, B_FLAGS: more coord dev flags for that side, e.g.
#          B_FLAGS=--journal-linger=0s
#        GEN: the coord binary that generates the load (default A: one
#          load generator for both sides)
#        BENCH_FLAGS: the load (default --clients 100 --conns 10 --size 256
#          --spread, the etcd comparison's shape)
#        SECS (10), WARM (2), DATA (parent of the data directories,
#          default a new directory under /tmp; a tmpfs such as /dev/shm
#          takes the disk out, for diagnosis only)
# Output, one line a run: the side, appends/s, p50 and p99 (ms), the
# members' and the load generator's CPU per append (µs), the mean commit
# (handing a batch to Raft until applied, ms), the mean log store write
# with its sync over all members (ms), appends per Raft entry, and the mean
# time of an Append in the leader's handlers and in the followers' (ms).
# Everything listens on 127.0.0.1 (coord dev's default ports: gRPC
# 7100-7102, http 7300-7302); the cluster is stopped after each run.
set -euo pipefail

cd "$(dirname "$0")/.."
pairs=${1:-3}
secs=${SECS:-10}
warm=${WARM:-2}
bench_flags=${BENCH_FLAGS:---clients 100 --conns 10 --size 256 --spread}
data=${DATA:-}
work=$(mktemp -d /tmp/logbook-ab.XXXXXX)
if [ -z "${A:-}" ] || [ -z "${B:-}" ]; then
	CGO_ENABLED=0 go build -o "$work/coord" ./cmd/coord
fi
a=${A:-$work/coord}
b=${B:-$work/coord}
gen=${GEN:-$a}
eps=127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102
hz=$(getconf CLK_TCK)

pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# metrics: the members' counters this script reads, one "port name value"
# line each.
metrics() {
	for port in 7300 7301 7302; do
		curl -s "http://127.0.0.1:$port/metrics" |
			grep -E '^logbook_(raft_commit_seconds|raft_log_store_seconds|journal_batch_ops)_(sum|count) |^logbook_grpc_request_seconds_(sum|count)\{method="/logbook.v1.Journal/Append"' |
			sed -E 's/\{[^}]*\}//' | sed "s/^/$port /"
	done
}

num() { echo "$1" | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\1/"; } # num JSON KEY

run() { # side binary env flags
	local side=$1 bin=$2 env=$3 flags=$4 dir
	if [ -n "$data" ]; then dir=$(mktemp -d "$data/logbook-ab.XXXXXX"); else dir="$work/data"; fi
	rm -rf "$dir"
	# shellcheck disable=SC2086 # env and flags are lists
	env $env "$bin" dev --nodes 0 --data-dir "$dir" $flags >"$work/dev.log" 2>&1 &
	pid=$!
	local deadline=$((SECONDS + 60))
	until "$gen" health --ready --endpoints "$eps" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { echo "coord dev not ready" >&2; cat "$work/dev.log" >&2; exit 1; }
		sleep 0.2
	done
	# shellcheck disable=SC2086
	GOGC=400 "$gen" bench journal --endpoints "$eps" $bench_flags --duration "${warm}s" --json >/dev/null
	local t0 t1 m0 m1 out
	m0=$(metrics)
	t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	# shellcheck disable=SC2086
	out=$(GOGC=400 "$gen" bench journal --endpoints "$eps" $bench_flags --duration "${secs}s" --json | tr -d ' \n')
	t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	m1=$(metrics)
	kill -INT "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	rm -rf "$dir"
	# The members' deltas: per member the count and sum of each series; the
	# leader is the member whose journal batches grew.
	printf '%s\n' "$m0" | sed 's/^/0 /' >"$work/m"
	printf '%s\n' "$m1" | sed 's/^/1 /' >>"$work/m"
	awk -v side="$side" -v ops="$(num "$out" ops_per_sec)" -v p50="$(num "$out" p50_ms)" -v p99="$(num "$out" p99_ms)" \
		-v gen="$(num "$out" cpu_us_per_op)" -v ticks=$((t1 - t0)) -v hz="$hz" -v secs="$secs" '
		{ v[$2 " " $3] += ($1 == 1 ? $4 : -$4) }
		END {
			leader = ""
			for (p = 7300; p <= 7302; p++) if (v[p " logbook_journal_batch_ops_count"] > 0) leader = p
			for (p = 7300; p <= 7302; p++) {
				cs += v[p " logbook_raft_commit_seconds_sum"]; cc += v[p " logbook_raft_commit_seconds_count"]
				ss += v[p " logbook_raft_log_store_seconds_sum"]; sc += v[p " logbook_raft_log_store_seconds_count"]
				bs += v[p " logbook_journal_batch_ops_sum"]; bc += v[p " logbook_journal_batch_ops_count"]
				hs = v[p " logbook_grpc_request_seconds_sum"]; hc = v[p " logbook_grpc_request_seconds_count"]
				if (p == leader) { ls += hs; lc += hc } else { fs += hs; fc += hc }
			}
			printf "%s appends/s %.0f p50 %.2f p99 %.2f members_us %.1f generator_us %.1f commit_ms %.3f store_ms %.3f ops_per_entry %.1f leader_append_ms %.2f follower_append_ms %.2f\n",
				side, ops, p50, p99, ticks / hz * 1e6 / (ops * secs), gen,
				cc ? 1000 * cs / cc : 0, sc ? 1000 * ss / sc : 0, bc ? bs / bc : 0,
				lc ? 1000 * ls / lc : 0, fc ? 1000 * fs / fc : 0
		}' "$work/m" | tee -a "$work/runs"
}

: >"$work/runs"
for p in $(seq 1 "$pairs"); do
	if [ $((p % 2)) = 1 ]; then
		run A "$a" "${A_ENV:-}" "${A_FLAGS:-}"
		run B "$b" "${B_ENV:-}" "${B_FLAGS:-}"
	else
		run B "$b" "${B_ENV:-}" "${B_FLAGS:-}"
		run A "$a" "${A_ENV:-}" "${A_FLAGS:-}"
	fi
done
# Medians per side of every figure.
for side in A B; do
	awk -v side="$side" '$1 == side {
		n++; for (i = 2; i < NF; i += 2) { name[i] = $i; val[i, n] = $(i + 1) }
	} END {
		printf "median %s (%d runs):", side, n
		for (i = 2; i in name; i += 2) {
			m = 0
			for (j = 1; j <= n; j++) a[j] = val[i, j]
			for (j = 2; j <= n; j++) { x = a[j]; for (k = j - 1; k >= 1 && a[k] > x; k--) a[k + 1] = a[k]; a[k + 1] = x }
			m = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			printf " %s %s", name[i], m
		}
		printf "\n"
	}' "$work/runs"
done
