#!/usr/bin/env bash
# etcd-vs-logbook.sh: one run, same machine, same disk — etcd's put benchmark
# against a 3-member etcd cluster and `coord bench journal` against a
# 3-member Logbook cluster (`coord dev`), one after the other, both with 100 clients spread over
# the three members (see SHAPE) and 256-byte values. Prints both results
# and the ratios of Logbook's target (throughput ≥ 3× etcd's, p99 ≤ half),
# then where the machine's CPU went during each measured run ("cpu:" lines):
# the servers' cores from /proc/PID/stat, the load generator's own CPU (it
# reports it), and the whole machine's busy share from /proc/stat, each per
# operation. Where both systems keep the machine busy, the throughput ratio
# is about the ratio of machine CPU per operation; go run ./bench/grpcfloor
# measures the part of it that is gRPC alone. Before each pair a "disk:"
# line (bench/diskcheck) gives what a 12 KB pwrite + fdatasync took in the
# data directory, alone and three at once: the disk moves both systems'
# figures from day to day.
#
# Usage: bash bench/etcd-vs-logbook.sh [seconds]   (default 10 s of Logbook load;
#        etcd runs a fixed request count sized to take about as long)
#        RUNS=N repeats the pair N times (fresh data dirs each time; etcd
#        runs first in odd pairs, Logbook in even ones) and prints the
#        median of each ratio.
# Env:   ETCD_VERSION (default v3.6.16), CLIENTS (100), CONNS (connections the
#        clients share, both tools alike; default CLIENTS: one each), BENCH_DIR
#        (temporary), RUNS (1), LOG_STORE (coord dev --raft-log-store: auto,
#        wal or boltdb; default auto, which is wal in the fresh data dir),
#        SHAPE: spread (default) spreads both tools' clients over the three
#        members by connection (etcdput --pin: connection i talks to member
#        i mod 3; coord bench journal --spread: SDK client i sends to member
#        i mod 3, followers forward to the leader): 100 clients spread
#        over all members; leader sends every Logbook append to the
#        leader while etcd's connections balance over all members;
#        etcd-default runs etcd's benchmark as it runs by default
#        (connections balanced over all members) against Logbook's
#        --spread clients. DEV_FLAGS: more
#        coord dev flags, e.g. DEV_FLAGS=--raft-wal-prefill=false (with
#        LB_PROCS=3, flags for each coord serve).
#        LB_PROCS=3: run Logbook as three `coord serve` processes (the
#        compose shape, on 127.0.0.1), as etcd runs, instead of `coord
#        dev`'s one process holding all three members (default 1): each
#        process then has its own Go scheduler and collector competing for
#        the cores, as etcd's three do.
#        WARM: seconds of unmeasured load each system gets after its
#        usual warm-up and before the measured run (default 0), to
#        compare clusters past their first seconds (Logbook's heap grows
#        for ~15 s from a fresh start; then its journal is at its limits
#        and snapshots and trims run).
#        GEN_GOGC: the garbage-collection target (GOGC) of both load
#        generators (default 400, coord bench's own default; etcd's
#        benchmark runs with the same: a generator's heap is a few MB, and
#        at Go's default of 100 its collections take CPU from the cluster
#        it measures: docs/benchmarks.md, "What the settings are worth").
#        TLS=1: both systems secured, same CA type (ECDSA P-256 from
#        coord tls): etcd with client and peer TLS and client certificate
#        auth (--client-cert-auth, --peer-client-cert-auth), Logbook with
#        mutual TLS on every connection (coord serve --tls-*, or coord dev
#        --secure with LB_PROCS=1) and ACLs enforced (--acl-enabled,
#        bootstrapped with a token the load generator calls with, so every
#        append is authenticated by token and authorized by role); both
#        load generators present a client certificate. Default 0: both in
#        plaintext.
#        ACL=0 (with TLS=1 and LB_PROCS=3): Logbook without ACLs, the
#        client certificate alone, to measure what the ACL checks cost.
#        FLOOR=1: after each pair, also run bench/grpcfloor (a Journal
#        service whose Append answers at once, client and server in one
#        process, same clients, connections and payload, GOGC=GEN_GOGC)
#        for as long, and print its calls/s against etcd's puts/s and
#        Logbook's appends/s: the most any unary gRPC service reaches here.
# Everything listens on 127.0.0.1 only; all processes are stopped on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
secs=${1:-10}
clients=${CLIENTS:-100}
conns=${CONNS:-$clients}
etcd_version=${ETCD_VERSION:-v3.6.16}
runs=${RUNS:-1}
log_store=${LOG_STORE:-auto}
dev_flags=${DEV_FLAGS:-}
lb_procs=${LB_PROCS:-1}
case "$lb_procs" in
1 | 3) ;;
*) echo "LB_PROCS=$lb_procs: want 1 (coord dev) or 3 (three coord serve)" >&2; exit 2 ;;
esac
shape=${SHAPE:-spread}
warm=${WARM:-0}
floor=${FLOOR:-0}
tls=${TLS:-0}
case "$tls" in
0 | 1) ;;
*) echo "TLS=$tls: want 0 or 1" >&2; exit 2 ;;
esac
acl=${ACL:-$tls}
case "$acl" in
0) ;;
1) [ "$tls" = 1 ] || { echo "ACL=1 needs TLS=1" >&2; exit 2; } ;;
*) echo "ACL=$acl: want 0 or 1" >&2; exit 2 ;;
esac
gen_gogc=${GEN_GOGC:-400} # the load generators only, not the servers
case "$shape" in
spread) etcd_shape=--pin lb_shape=--spread ;;
leader) etcd_shape= lb_shape= ;;
etcd-default) etcd_shape= lb_shape=--spread ;;
*) echo "SHAPE=$shape: want spread, leader or etcd-default" >&2; exit 2 ;;
esac
work=${BENCH_DIR:-$(mktemp -d /tmp/logbook-etcd-bench.XXXXXX)}
bin="$work/bin"
mkdir -p "$bin"

pids=()
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -z "${BENCH_DIR:-}" ]; then rm -rf "$work"; fi # a kept BENCH_DIR is not an error
}
trap cleanup EXIT

echo "== building etcd $etcd_version, its put benchmark and coord (both load generators run with GOGC=$gen_gogc)" >&2
(cd bench/etcdput && go mod download && \
	CGO_ENABLED=0 go build -o "$bin/etcd" go.etcd.io/etcd/server/v3 && \
	CGO_ENABLED=0 go build -o "$bin/etcdput" .)
grep -q "go.etcd.io/etcd/server/v3 $etcd_version" bench/etcdput/go.mod || \
	echo "note: bench/etcdput/go.mod pins $(grep 'go.etcd.io/etcd/server/v3 ' bench/etcdput/go.mod | awk '{print $2}'), not $etcd_version" >&2
CGO_ENABLED=0 go build -o "$bin/coord" ./cmd/coord
CGO_ENABLED=0 go build -o "$bin/diskcheck" ./bench/diskcheck
if [ "$floor" = 1 ]; then CGO_ENABLED=0 go build -o "$bin/grpcfloor" ./bench/grpcfloor; fi

# TLS=1: one CA for both systems; etcd's members get coordinator-role
# certificates (server and client authentication, SANs 127.0.0.1).
scheme=http etcd_tls=() etcdput_tls=() serve_tls=()
if [ "$tls" = 1 ]; then
	pki="$work/pki"
	rm -rf "$pki"
	"$bin/coord" tls ca create --dir "$pki" >/dev/null
	for n in e1 e2 e3 coord1 coord2 coord3; do
		"$bin/coord" tls cert create --ca "$pki/ca.pem" --dir "$pki" --name "$n" --role coordinator >/dev/null
	done
	"$bin/coord" tls cert create --ca "$pki/ca.pem" --dir "$pki" --name bench --role client >/dev/null
	scheme=https
	etcdput_tls=(--cert "$pki/bench.pem" --key "$pki/bench-key.pem" --cacert "$pki/ca.pem")
	if [ "$lb_procs" = 3 ]; then
		export LOGBOOK_TLS_CERT="$pki/bench.pem" LOGBOOK_TLS_KEY="$pki/bench-key.pem" LOGBOOK_TLS_CA="$pki/ca.pem"
		if [ "$acl" = 1 ]; then # every coordinator bootstraps with this token, the generator calls with it
			"$bin/coord" acl token gen >"$pki/acl.token"
			export LOGBOOK_TOKEN_FILE="$pki/acl.token"
		fi
	else # coord dev --secure makes its own CA in its data dir (and enforces ACLs)
		export LOGBOOK_TLS_CERT="$work/logbook/tls/admin.pem" LOGBOOK_TLS_KEY="$work/logbook/tls/admin-key.pem" LOGBOOK_TLS_CA="$work/logbook/tls/ca.pem"
		dev_flags="$dev_flags --secure"
	fi
fi

wait_port() { # host:port
	local deadline=$((SECONDS + 30))
	until (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || { echo "timeout waiting for $1" >&2; exit 1; }
		sleep 0.2
	done
}

hz=$(getconf CLK_TCK) ncpu=$(nproc)
# cpu_mark PID...: wall seconds, the CPU ticks the PIDs used so far, and the
# machine's busy and total ticks (/proc/stat: busy excludes idle, iowait
# and steal).
cpu_mark() {
	local t ticks
	t=$(date +%s.%N)
	ticks=$(for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat"; done | awk '{s += $1} END {print s + 0}')
	echo "$t $ticks $(awk '/^cpu /{b = $2 + $3 + $4 + $7 + $8; print b, b + $5 + $6 + $9}' /proc/stat)"
}
# cpu_report NAME OPS_PER_S LOADGEN_US_PER_OP MARK0 MARK1: where the machine's
# CPU went over a measured run, per operation.
cpu_report() {
	awk -v name="$1" -v ops="$2" -v gen="$3" -v hz="$hz" -v ncpu="$ncpu" -v m0="$4" -v m1="$5" 'BEGIN{
		split(m0, a, " "); split(m1, b, " ")
		wall = b[1] - a[1]; cores = (b[2] - a[2]) / hz / wall
		busy = (b[3] - a[3]) / (b[4] - a[4])
		printf "cpu:        %-7s servers %.2f cores = %.0f µs/op, load generator %.0f µs/op, machine %.0f%% busy = %.0f µs/op\n",
			name, cores, 1e6 * cores / ops, gen, 100 * busy, 1e6 * busy * ncpu / ops
	}'
}

# run_etcd N: one measured etcd run of pair N; prints its JSON line and
# sets etcd_json and etcd_cpu.
run_etcd() {
	echo "== run $1: etcd, 3 members on 127.0.0.1:23791-23793 (shape $shape)" >&2
	local cluster="e1=$scheme://127.0.0.1:23801,e2=$scheme://127.0.0.1:23802,e3=$scheme://127.0.0.1:23803"
	for i in 1 2 3; do
		if [ "$tls" = 1 ]; then
			etcd_tls=(--cert-file "$pki/e$i.pem" --key-file "$pki/e$i-key.pem" --trusted-ca-file "$pki/ca.pem" --client-cert-auth
				--peer-cert-file "$pki/e$i.pem" --peer-key-file "$pki/e$i-key.pem" --peer-trusted-ca-file "$pki/ca.pem" --peer-client-cert-auth)
		fi
		"$bin/etcd" --name "e$i" --data-dir "$work/etcd$i" \
			--listen-client-urls "$scheme://127.0.0.1:2379$i" --advertise-client-urls "$scheme://127.0.0.1:2379$i" \
			--listen-peer-urls "$scheme://127.0.0.1:2380$i" --initial-advertise-peer-urls "$scheme://127.0.0.1:2380$i" \
			--initial-cluster "$cluster" --initial-cluster-state new --log-level error "${etcd_tls[@]}" \
			>"$work/etcd$i.log" 2>&1 &
		pids+=($!)
	done
	for i in 1 2 3; do wait_port "127.0.0.1:2379$i"; done
	local eps=127.0.0.1:23791,127.0.0.1:23792,127.0.0.1:23793
	GOGC="$gen_gogc" "$bin/etcdput" "${etcdput_tls[@]}" --endpoints "$eps" --conns "$conns" --clients "$clients" --total 5000 --val-size 256 --sequential-keys $etcd_shape >/dev/null # warm-up, leader elected
	# size the measured run to about $secs seconds from a short probe
	local probe rate total
	probe=$(GOGC="$gen_gogc" "$bin/etcdput" "${etcdput_tls[@]}" --endpoints "$eps" --conns "$conns" --clients "$clients" --total 20000 --val-size 256 --sequential-keys $etcd_shape --json)
	rate=$(echo "$probe" | sed -E 's/.*"ops_per_s":([0-9.]+).*/\1/')
	total=$(awk -v r="$rate" -v s="$secs" 'BEGIN{printf "%d", r*s}')
	if [ "$warm" -gt 0 ]; then # unmeasured load, about $warm seconds
		GOGC="$gen_gogc" "$bin/etcdput" "${etcdput_tls[@]}" --endpoints "$eps" --conns "$conns" --clients "$clients" --total "$(awk -v r="$rate" -v s="$warm" 'BEGIN{printf "%d", r*s}')" \
			--key-size 8 --val-size 256 --sequential-keys $etcd_shape >/dev/null
	fi
	local m0 m1
	m0=$(cpu_mark "${pids[@]}")
	etcd_json=$(GOGC="$gen_gogc" "$bin/etcdput" "${etcdput_tls[@]}" --endpoints "$eps" --conns "$conns" --clients "$clients" --total "$total" \
		--key-size 8 --val-size 256 --sequential-keys --key-space-size "$total" $etcd_shape --json)
	m1=$(cpu_mark "${pids[@]}")
	echo "etcd    $etcd_json"
	etcd_cpu=$(cpu_report etcd "$(num "$etcd_json" ops_per_s)" "$(num "$etcd_json" cpu_us_per_op)" "$m0" "$m1")
	for p in "${pids[@]}"; do kill "$p"; done
	wait 2>/dev/null || true
	pids=()
}

# run_logbook N: one measured Logbook run of pair N; prints its JSON line
# and sets lb_json and lb_cpu.
run_logbook() {
	if [ "$lb_procs" = 3 ]; then
		echo "== run $1: logbook, three coord serve (gRPC 127.0.0.1:7100-7102, raft log store $log_store${dev_flags:+, $dev_flags})" >&2
		local i
		: >"$work/logbook.log"
		for i in 0 1 2; do
			# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
			if [ "$tls" = 1 ]; then
				serve_tls=(--tls-cert "$pki/coord$((i + 1)).pem" --tls-key "$pki/coord$((i + 1))-key.pem" --tls-ca "$pki/ca.pem")
				if [ "$acl" = 1 ]; then serve_tls+=(--acl-enabled --acl-bootstrap-token-file "$pki/acl.token"); fi
			fi
			"$bin/coord" serve "${serve_tls[@]}" --id "coord$((i + 1))" --data-dir "$work/logbook/coord$((i + 1))" --raft-log-store "$log_store" \
				--raft-addr "127.0.0.1:700$i" --grpc-addr "127.0.0.1:710$i" --gossip-addr "127.0.0.1:720$i" --http-addr "127.0.0.1:730$i" \
				--bootstrap-expect 3 --join 127.0.0.1:7200,127.0.0.1:7201,127.0.0.1:7202 $dev_flags >>"$work/logbook.log" 2>&1 &
			pids+=($!)
		done
	else
		echo "== run $1: logbook, coord dev (3 members, gRPC 127.0.0.1:7100-7102, raft log store $log_store${dev_flags:+, $dev_flags})" >&2
		# shellcheck disable=SC2086 # DEV_FLAGS is a list of flags
		"$bin/coord" dev --data-dir "$work/logbook" --raft-log-store "$log_store" $dev_flags >"$work/logbook.log" 2>&1 &
		pids+=($!)
	fi
	local leps=127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102
	local deadline=$((SECONDS + 60))
	until "$bin/coord" health --ready --endpoints "$leps" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { echo "logbook not ready" >&2; cat "$work/logbook.log" >&2; exit 1; }
		sleep 0.2
	done
	if [ "$acl" = 1 ]; then # the ACLs bootstrapped: the caller is an admin
		until "$bin/coord" acl whoami --endpoints "$leps" 2>/dev/null | grep -q '^roles: admin'; do
			[ $SECONDS -lt $deadline ] || { echo "logbook ACLs not bootstrapped" >&2; cat "$work/logbook.log" >&2; exit 1; }
			sleep 0.2
		done
	fi
	GOGC="$gen_gogc" "$bin/coord" bench journal --endpoints "$leps" --clients "$clients" --conns "$conns" --size 256 --duration "$((2 + warm))s" $lb_shape --json >/dev/null # warm-up
	local m0 m1
	m0=$(cpu_mark "${pids[@]}")
	lb_json=$(GOGC="$gen_gogc" "$bin/coord" bench journal --endpoints "$leps" --clients "$clients" --conns "$conns" --size 256 --duration "${secs}s" $lb_shape --json)
	m1=$(cpu_mark "${pids[@]}")
	echo "logbook $lb_json"
	lb_cpu=$(cpu_report logbook "$(num "$lb_json" ops_per_sec)" "$(num "$lb_json" cpu_us_per_op)" "$m0" "$m1")
	for p in "${pids[@]}"; do kill "$p"; done
	wait 2>/dev/null || true
	pids=()
}

etcd_json='' etcd_cpu='' lb_json='' lb_cpu=''
# run_once N: pair N, etcd first in odd pairs and Logbook first in even
# ones, so that a machine that speeds up or slows down during a set
# weighs on both systems alike; prints both JSON lines, the ratios and
# the cpu: lines.
run_once() {
	rm -rf "$work"/etcd[123] "$work/logbook"
	sync # the builds' and the last run's dirty pages are on disk before either system runs
	"$bin/diskcheck" --dir "$work" # the disk this pair runs on (a "disk:" line)
	if [ $(($1 % 2)) = 1 ]; then
		run_etcd "$1"
		sync # the first system's dirty pages are written back now, not during the second's run
		run_logbook "$1"
	else
		run_logbook "$1"
		sync
		run_etcd "$1"
	fi

	awk -v eo="$(num "$etcd_json" ops_per_s)" -v ep="$(num "$etcd_json" p99_ms)" \
		-v lo="$(num "$lb_json" ops_per_sec)" -v lp="$(num "$lb_json" p99_ms)" -v run="$1" 'BEGIN{
		printf "throughput: logbook %.0f ops/s vs etcd %.0f ops/s = %.2fx (target >= 3x)\n", lo, eo, lo/eo
		printf "p99:        logbook %.2f ms vs etcd %.2f ms = %.2f of etcd (target <= 0.5)\n", lp, ep, lp/ep
		printf "ratios %d %.4f %.4f\n", run, lo/eo, lp/ep > "/dev/stderr"
	}' 2>>"$work/ratios"
	echo "$etcd_cpu"
	echo "$lb_cpu"
	if [ "$floor" = 1 ]; then
		local floor_json
		sync
		floor_json=$(GOGC="$gen_gogc" "$bin/grpcfloor" --clients "$clients" --conns "$conns" --size 256 --duration "${secs}s")
		echo "floor   $floor_json"
		awk -v f="$(num "$floor_json" ops_per_sec)" -v fc="$(num "$floor_json" cpu_us_per_op)" \
			-v eo="$(num "$etcd_json" ops_per_s)" -v lo="$(num "$lb_json" ops_per_sec)" 'BEGIN{
			printf "floor:      bare gRPC %.0f calls/s (%.0f µs/call) = %.2fx etcd; logbook = %.0f%% of it (3x etcd = %.0f%%)\n", f, fc, f/eo, 100*lo/f, 300*eo/f
		}'
	fi
}

num() { echo "$1" | tr -d " \n" | sed -E "s/.*\"$2\":([0-9.e+-]+).*/\1/"; }

: >"$work/ratios"
for run in $(seq 1 "$runs"); do
	[ "$runs" -gt 1 ] && echo "-- run $run of $runs"
	run_once "$run"
done
if [ "$runs" -gt 1 ]; then
	# The median of each ratio over the runs (each run pairs one etcd and one
	# Logbook measurement, back to back).
	sort -k3 -n "$work/ratios" | awk -v n="$runs" '{a[NR]=$3} END {m=(n%2)?a[(n+1)/2]:(a[n/2]+a[n/2+1])/2; printf "median over %d runs: throughput %.2fx (target >= 3x)", n, m}'
	sort -k4 -n "$work/ratios" | awk -v n="$runs" '{a[NR]=$4} END {m=(n%2)?a[(n+1)/2]:(a[n/2]+a[n/2+1])/2; printf ", p99 %.2f of etcd (target <= 0.5)\n", m}'
fi
