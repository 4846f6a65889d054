#!/usr/bin/env bash
# Builds the service image (Dockerfile at the repository root) without a
# registry: a static binary (CGO_ENABLED=0) built on the host, copied with the
# example policy file into a FROM-scratch image. Then checks it: the binary
# is statically linked, the image runs as a non-root user, and a container of
# it becomes healthy through its own HEALTHCHECK (-healthcheck) and answers
# GET /healthz on a loopback-published port, with /metrics on the admin
# port (APP_WEB_ADMIN_ADDR=:9090) and not on the public one. Everything it
# starts is removed, also on failure.
# Usage: deploy/image/build.sh [tag]   (default $IMAGE or tech-log/tech-log-backend:local)
set -euo pipefail

tag="${1:-${IMAGE:-tech-log/tech-log-backend:local}}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
command -v docker >/dev/null 2>&1 || { echo "image: docker not on PATH" >&2; exit 1; }

ctx="$(mktemp -d)"
name="tlb-image-check-$$"
cleanup() {
	docker rm -f "$name" >/dev/null 2>&1 || true
	rm -rf "$ctx"
}
trap cleanup EXIT

echo "image: go build (CGO_ENABLED=0, static)"
(cd "$root/app-bootstrap" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/tech-log-backend" ./cmd/tech-log-backend)
if ldd "$ctx/tech-log-backend" >/dev/null 2>&1; then
	echo "image: the binary is dynamically linked:" >&2
	ldd "$ctx/tech-log-backend" >&2
	exit 1
fi
cp "$root/app-bootstrap/examples/policies.json" "$ctx/policies.json"
cp "$root/Dockerfile" "$ctx/Dockerfile"

# The legacy builder warns about buildx on stderr; show the output only on failure.
if ! out=$(docker build --quiet --tag "$tag" "$ctx" 2>&1); then
	echo "$out" >&2
	exit 1
fi
echo "image: built $tag ($(docker image inspect --format '{{.Size}}' "$tag") bytes)"

user=$(docker image inspect --format '{{.Config.User}}' "$tag")
case "$user" in
"" | 0 | 0:* | root | root:*) echo "image: runs as root (USER '$user')" >&2; exit 1 ;;
esac

# Smoke test: the default configuration (local limiter, no Redis) becomes
# healthy through the image's own HEALTHCHECK, probed every second here.
docker run -d --name "$name" --health-interval=1s --health-start-period=0s \
	-p 127.0.0.1::8080 -p 127.0.0.1::9090 "$tag" >/dev/null
state=""
for _ in $(seq 1 30); do
	state=$(docker inspect --format '{{.State.Health.Status}}' "$name")
	[ "$state" = healthy ] && break
	[ "$(docker inspect --format '{{.State.Running}}' "$name")" = true ] || break
	sleep 1
done
if [ "$state" != healthy ]; then
	echo "image: container not healthy after 30s (health: $state)" >&2
	docker logs "$name" 2>&1 | tail -20 >&2
	docker inspect --format '{{json .State.Health}}' "$name" >&2 || true
	exit 1
fi
port=$(docker port "$name" 8080/tcp | head -1)
port="${port##*:}"
code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$port/healthz" || true)
if [ "$code" != 200 ]; then
	echo "image: GET /healthz on 127.0.0.1:$port answered $code" >&2
	exit 1
fi
admin=$(docker port "$name" 9090/tcp | head -1)
admin="${admin##*:}"
code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$port/metrics" || true)
if [ "$code" != 404 ]; then
	echo "image: GET /metrics on the public port 127.0.0.1:$port answered $code, want 404 (APP_WEB_ADMIN_ADDR)" >&2
	exit 1
fi
code=$(curl -s -o /dev/null -m 3 -w '%{http_code}' "http://127.0.0.1:$admin/metrics" || true)
if [ "$code" != 200 ]; then
	echo "image: GET /metrics on the admin port 127.0.0.1:$admin answered $code" >&2
	exit 1
fi
echo "image: ok: static binary, USER $user, HEALTHCHECK healthy, GET /healthz 200, /metrics on the admin port only"
