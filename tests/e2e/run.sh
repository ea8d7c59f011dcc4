#!/usr/bin/env bash
# The compose end-to-end suite (make e2e, .ci/run). Needs docker and
# compose (`docker compose` or docker-compose); builds the image itself.
# Extra arguments go to go test, e.g.  tests/e2e/run.sh -run TestFailoverTime
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

command -v go >/dev/null || { echo "e2e: go is required" >&2; exit 1; }
command -v docker >/dev/null || { echo "e2e: docker is required" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "e2e: the docker daemon does not answer (docker info)" >&2; exit 1; }
if docker compose version >/dev/null 2>&1; then
  echo "e2e: using $(docker compose version)"
elif command -v docker-compose >/dev/null; then
  echo "e2e: using docker-compose $(docker-compose version --short 2>/dev/null)"
else
  echo "e2e: docker compose (plugin) or docker-compose is required" >&2
  exit 1
fi

# -v streams progress and the failover figures; without it go test shows a
# passing package's output not at all.
out=$(mktemp)
trap 'rm -f "$out"' EXIT
set +e
go test -tags e2e -count=1 -timeout 25m -v "$@" ./tests/e2e/ 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
  # A failed test dumps its containers' logs after its failure, which then
  # scrolls out of a CI log's tail: repeat each failed test's own lines
  # (steps and errors, without the compose logs) at the very end.
  echo "== e2e recap: the failed tests' own lines, compose logs left out"
  awk '
    /^=== RUN   [^\/]+$/ { buf = "" }
    /^[ \t]+[A-Za-z0-9_]+_test\.go:[0-9]+: / { buf = buf $0 "\n" }
    /^[ \t]*--- FAIL: / { buf = buf $0 "\n" }
    /^--- FAIL: / { printf "%s", buf; buf = "" }
    /^--- PASS: / { buf = "" }
    /^panic: |^FAIL|^ok / { print }
  ' "$out"
fi
exit "$rc"
