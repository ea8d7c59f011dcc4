#!/usr/bin/env bash
# Build the static coord and node binaries on the host and the FROM-scratch
# image holding both.
#
#   deploy/compose/build.sh            # image logbook-coord:dev
#   deploy/compose/build.sh v1         # image logbook-coord:v1
#   deploy/compose/build.sh reg/x:tag  # a full image name is used as given
#
# The binary and the build context live in deploy/compose/.build/ (ignored
# by git). Nothing is pulled: the image is FROM scratch.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
ctx="$here/.build"

arg=${1:-dev}
case "$arg" in
  *:* | */*) image=$arg ;;
  *) image="logbook-coord:$arg" ;;
esac

command -v go >/dev/null || { echo "build.sh: go is required" >&2; exit 1; }
command -v docker >/dev/null || { echo "build.sh: docker is required" >&2; exit 1; }

# Build for the daemon's platform, not necessarily the host's.
arch=$(docker version --format '{{.Server.Arch}}' 2>/dev/null || true)
arch=${arch:-$(go env GOARCH)}

rm -rf "$ctx"
mkdir -p "$ctx/data" "$ctx/tls"
for bin in coord node; do
  echo "== go build $bin (linux/$arch, static)"
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -o "$ctx/$bin" "./cmd/$bin")
done
cp "$here/Dockerfile" "$ctx/Dockerfile"

# Without the buildx plugin, recent docker CLIs need the classic builder
# asked for explicitly; the Dockerfile needs nothing BuildKit adds.
if ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi
echo "== docker build $image"
# The classic builder's deprecation notice is noise: show output on failure only.
if ! out=$(docker build --quiet --tag "$image" "$ctx" 2>&1); then
  echo "$out" >&2
  exit 1
fi
echo "$image"
