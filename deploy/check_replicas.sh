#!/usr/bin/env bash
# The deployment of docker-compose.yml without Docker (no daemon here): two `streamlit run app.py` replicas on
# loopback sharing one cookie secret, Debian's nginx in front with deploy/nginx.conf (sticky sessions), then the
# classroom load test through nginx, a check that every browser stayed on one replica and that both replicas
# served, and everything stopped.
#
#   bash deploy/check_replicas.sh [MINUTES (default 1)] [SESSIONS (default 30)]
#
# Exit status 0 only when the load test passed (no error, bounded memory) and the sessions were sticky and spread.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-1}
SESSIONS=${2:-30}

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq nginx >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  [ -f "$WORK/nginx.pid" ] && "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -s stop 2>/dev/null || true
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

read -r PORT_1 PORT_2 PORT_LB < <(python - <<'EOF'
import socket
sockets = [socket.socket() for _ in range(3)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))
EOF
)
SECRET=$(python -c "import secrets; print(secrets.token_hex(32))")

mkdir "$WORK/runs"  # one user directory for both replicas, as the shared volume in docker-compose.yml
for port in "$PORT_1" "$PORT_2"; do
  STREAMLIT_SERVER_COOKIE_SECRET=$SECRET ATTENTION_LAB_USER_DIR="$WORK/runs" PYTHONUNBUFFERED=1 \
    python -m streamlit run app.py \
    --server.address 127.0.0.1 --server.port "$port" >"$WORK/app_$port.log" 2>&1 &
  PIDS+=($!)
done

# The site file as the nginx image would render it, inside a minimal main config that keeps everything in $WORK
# and logs, for each request, the browser's sticky id (its cookie, or the one it is being given) and the replica.
sed -e "s/\${LISTEN_PORT}/127.0.0.1:$PORT_LB/" -e "s/\${UPSTREAM_1}/127.0.0.1:$PORT_1/" \
    -e "s/\${UPSTREAM_2}/127.0.0.1:$PORT_2/" deploy/nginx.conf >"$WORK/site.conf"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 1024; }
http {
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  fastcgi_temp_path $WORK/fastcgi;
  uwsgi_temp_path $WORK/uwsgi;
  scgi_temp_path $WORK/scgi;
  include $WORK/site.conf;
  log_format sticky '\$lab_replica \$upstream_addr \$status \$request_uri';
  access_log $WORK/access.log sticky;
}
EOF
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -t -q
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf"

LB=http://127.0.0.1:$PORT_LB
python - "$LB" "$PORT_1" "$PORT_2" <<'EOF'
import sys, time, urllib.request
lb, ports = sys.argv[1], sys.argv[2:]
for url in [f"http://127.0.0.1:{port}" for port in ports] + [lb]:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=3) as response:
                print(f"{url}/_stcore/health: {response.status} {response.read().decode()}")
                break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"{url}: no health after 120 s")
            time.sleep(1)
EOF

echo "two replicas (processes ${PIDS[*]}) on ports $PORT_1 and $PORT_2 behind nginx at $LB"
status=0
python tests/benchmarks/load_test.py --url "$LB" --pid "${PIDS[0]}" --pid "${PIDS[1]}" \
  --warm "http://127.0.0.1:$PORT_1" --warm "http://127.0.0.1:$PORT_2" \
  --sessions "$SESSIONS" --minutes "$MINUTES" || status=$?

# Sticky and spread: all requests of one browser (its page without the cookie, then its websocket with it) reached
# one replica, and both replicas got browsers.
python - "$WORK/access.log" <<'EOF' || status=1
import collections, sys
upstreams, requests = collections.defaultdict(set), collections.Counter()
for line in open(sys.argv[1]):
    browser, upstream, *_ = line.split()
    if browser != "-" and upstream != "-":
        upstreams[browser].add(upstream)
        requests[browser] += 1
moved = [browser for browser, where in upstreams.items() if len(where) > 1]
spread = collections.Counter(next(iter(where)) for where in upstreams.values())
several = sum(count > 1 for count in requests.values())
print(f"sticky sessions: {len(upstreams)} browsers ({several} with more than one request), {len(moved)} reached "
      f"more than one replica; browsers per replica: {dict(spread)}")
if moved or len(spread) < 2 or not several:
    sys.exit("NOT sticky, or not spread over both replicas")
EOF
exit $status
