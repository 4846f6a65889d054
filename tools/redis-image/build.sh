#!/usr/bin/env bash
# Builds a FROM-scratch Redis image from the host's redis-server binary and
# the shared libraries it links (as `ldd` lists them, plus the loader).
# Usage: tools/redis-image/build.sh [tag]   (default $REDIS_TEST_IMAGE or
# tech-log/redis-test:local). Needs docker and redis-server on this machine.
set -euo pipefail

tag="${1:-${REDIS_TEST_IMAGE:-tech-log/redis-test:local}}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(command -v redis-server || true)"
if [ -z "$bin" ]; then
	echo "redis-image: redis-server not on PATH (apt-get install redis-server)" >&2
	exit 1
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/data" "$root/tmp"
chmod 1777 "$root/data" "$root/tmp"

# stage copies a host file to the same path in the image, following symlinks
# so the image holds the real bytes under the name the loader asks for.
stage() {
	local src="$1"
	mkdir -p "$root$(dirname "$src")"
	cp -L "$src" "$root$src"
}

# Always /usr/bin/redis-server in the image: the Debian binary picks its mode
# from argv[0] (redis-server is a symlink to redis-check-rdb), so the name matters.
mkdir -p "$root/usr/bin"
cp -L "$bin" "$root/usr/bin/redis-server"

# ldd lines: "libx.so => /path/libx.so (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
# "linux-vdso.so.1 (0x...)" (kernel-provided, no file).
libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u)
if [ -z "$libs" ]; then
	echo "redis-image: ldd listed no libraries for $bin" >&2
	exit 1
fi
for lib in $libs; do
	stage "$lib"
done
cp "$here/Dockerfile" "$ctx/Dockerfile"

echo "redis-image: $("$bin" --version)"
echo "redis-image: $(echo "$libs" | wc -l) libraries from ldd"
# The legacy builder warns about buildx on stderr; show the output only on failure.
if ! out=$(docker build --quiet --tag "$tag" "$ctx" 2>&1); then
	echo "$out" >&2
	exit 1
fi
echo "redis-image: built $tag ($(docker image inspect --format '{{.Size}}' "$tag") bytes)"

# Smoke test: the image starts and reports its version.
docker run --rm "$tag" --version
