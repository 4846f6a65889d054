#!/usr/bin/env bash
# make compose-demo: starts deploy/compose.yaml (two instances + the local
# Redis image), shows the global limit across both instances and the fail-
# closed answer without Redis, and tears everything down, also on failure or
# Ctrl-C. Every wait and every request is bounded; requests go only to the
# loopback-published ports. Exits non-zero if an expectation fails.
# Needs the images (make image redis-image; the Makefile target builds them).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
file="$here/compose.yaml"
# One project per run (its network and containers), so two runs on one
# Docker engine (two CI clones on one machine) never share or remove each
# other's; the published ports default to two free loopback ports.
project="${TLB_COMPOSE_PROJECT:-tlb-compose-demo-$$}"

# freeport FROM: the first port >= FROM (at most 200 tried) nothing listens on.
freeport() {
	local p
	for p in $(seq "$1" $(($1 + 199))); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "compose-demo: no free port in $1..$(($1 + 199))" >&2
	return 1
}
port1="${TLB_PORT_1:-$(freeport 18081)}"
port2="${TLB_PORT_2:-$(freeport $((port1 + 1)))}"
export TLB_PORT_1="$port1" TLB_PORT_2="$port2"

if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
else
	echo "compose-demo: neither 'docker compose' nor docker-compose is installed" >&2
	exit 1
fi
dc() { "${compose[@]}" -p "$project" -f "$file" "$@"; }

down() {
	echo "== compose-demo: down"
	dc down --volumes --remove-orphans --timeout 5 >/dev/null 2>&1 || true
}
trap down EXIT
trap 'exit 130' INT TERM

fail() {
	echo "compose-demo: FAIL: $*" >&2
	dc logs --no-color --tail 20 >&2 || true
	exit 1
}

# status METHOD PORT PATH: the HTTP status (000 when nothing answered).
status() {
	curl -s -o /dev/null -m 3 -X "$1" -w '%{http_code}' "http://127.0.0.1:$2$3" || true
}

echo "== compose-demo: up ($project: redis, app1 on 127.0.0.1:$port1, app2 on 127.0.0.1:$port2)"
dc up -d >/dev/null 2>&1 || { dc up -d; fail "compose up"; }

# Both instances ready (start-up checks passed against Redis): at most 60s.
for port in "$port1" "$port2"; do
	ok=""
	for _ in $(seq 1 120); do
		if [ "$(status GET "$port" /readyz)" = 200 ]; then ok=1; break; fi
		sleep 0.5
	done
	[ -n "$ok" ] || fail "127.0.0.1:$port not ready after 60s"
done
echo "== both instances ready"

# The demo's login policy (deploy/demo-policies.json) is a token bucket of 5
# refilling one token an hour, per client, globally: 10 requests alternating
# between the instances get exactly 5 admits in total.
admitted=0 denied=0 codes=""
for i in $(seq 1 10); do
	port=$([ $((i % 2)) = 1 ] && echo "$port1" || echo "$port2")
	code=$(status POST "$port" /api/v1/login)
	codes="$codes $code"
	case "$code" in
	200) admitted=$((admitted + 1)) ;;
	429) denied=$((denied + 1)) ;;
	*) fail "POST /api/v1/login on :$port answered $code" ;;
	esac
done
echo "== 10 x POST /api/v1/login alternating app1/app2:$codes"
[ "$admitted" = 5 ] && [ "$denied" = 5 ] || fail "want 5 admitted and 5 denied across both instances, got $admitted and $denied"
echo "== global limit holds across instances: 5 admitted, 5 denied (login: bucket of 5)"

# Without Redis the limiter cannot decide and refuses: 503, never an admit.
dc stop --timeout 2 redis >/dev/null 2>&1 || fail "compose stop redis"
for port in "$port1" "$port2"; do
	code=$(status GET "$port" /api/v1/ping)
	[ "$code" = 503 ] || fail "GET /api/v1/ping on :$port without Redis answered $code, want 503 (fail closed)"
done
echo "== redis stopped: both instances fail closed (503)"
echo "== compose-demo: ok"
