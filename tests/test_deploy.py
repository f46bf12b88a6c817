"""The several-replica deployment (issue 15, finding 7): every replica saves runs to one shared volume, and nginx
keeps a browser on one replica. Read from docker-compose.yml, the Dockerfile and deploy/nginx.conf (no Docker here)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml  # requirements-dev.txt

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
REPLICAS = {name: service for name, service in COMPOSE["services"].items() if service.get("image") == "attention-lab"}


def test_every_replica_saves_runs_to_one_named_volume():
    assert len(REPLICAS) >= 2
    mounts = set()
    for name, service in REPLICAS.items():
        user_dir = service["environment"]["ATTENTION_LAB_USER_DIR"]
        volumes = [v.split(":") for v in service.get("volumes", [])]
        at_user_dir = [source for source, target, *_ in volumes if target == user_dir]
        assert at_user_dir, f"{name} mounts nothing at its user directory {user_dir}"
        mounts.add((at_user_dir[0], user_dir))
    assert len(mounts) == 1, f"the replicas save to different places: {mounts}"
    (source, user_dir), = mounts
    assert source in COMPOSE.get("volumes", {}), f"{source} is not a named volume (declared under volumes:)"


def test_the_image_saves_runs_where_the_volume_is_mounted():
    dockerfile = (ROOT / "Dockerfile").read_text()
    user_dir = next(iter(REPLICAS.values()))["environment"]["ATTENTION_LAB_USER_DIR"]
    assert f"ENV ATTENTION_LAB_USER_DIR={user_dir}" in dockerfile
    # the app's user owns it, so the volume, copied from the image when first mounted, is writable
    assert re.search(rf"mkdir -p {re.escape(user_dir)} && chown lab {re.escape(user_dir)}", dockerfile)
    assert dockerfile.index("chown lab " + user_dir) < dockerfile.index("USER lab")


def test_nginx_keeps_a_browser_on_one_replica():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    upstream = re.search(r"upstream attention_lab \{(.*?)\n\}", conf, re.S).group(1)
    assert re.search(r"^\s*hash \$lab_replica consistent;", upstream, re.M), "routed by the browser's cookie"
    assert "$cookie_lab_replica" in conf and "lab_replica=$request_id" in conf
    servers = re.findall(r"^\s*server \$\{(UPSTREAM_\d+)\}", upstream, re.M)
    nginx_env = COMPOSE["services"]["nginx"]["environment"]
    assert sorted(nginx_env[s].split(":")[0] for s in servers) == sorted(REPLICAS)


def test_every_container_has_a_memory_limit_that_counts_training():
    """Issue 36: the README's per-replica figure left out the training processes (fork server ~300 MB, each run
    ~305 MB); the compose file's limit covers the server, the fork server and MAX_RUNS runs."""
    from core.training.live.runs import MAX_RUNNING

    for name, service in COMPOSE["services"].items():
        assert "mem_limit" in service, f"{name} has no memory limit"
    for name, service in REPLICAS.items():
        limit_mb = int(service["mem_limit"].removesuffix("g")) * 1024
        assert limit_mb >= 750 + 300 + MAX_RUNNING * 305, f"{name}: {limit_mb} MB cannot hold its training"
        assert service["memswap_limit"] == service["mem_limit"], "no swap beyond the limit: a slow replica helps none"
        assert service["environment"]["ATTENTION_LAB_TRUSTED_PROXY"] == "1"


def test_nginx_limits_requests_and_connections_per_client_address():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    zones = dict(re.findall(r"limit_req_zone \$binary_remote_addr zone=(\w+):\w+ rate=(\d+)r/s;", conf))
    assert set(zones) == {"lab_sessions", "lab_uploads"}
    assert re.search(r"limit_conn_zone \$binary_remote_addr zone=lab_connections:", conf)
    assert re.search(r"^\s*limit_conn lab_connections \d+;", conf, re.M)
    stream = re.search(r"location /_stcore/stream \{(.*?)\}", conf, re.S).group(1)
    assert "limit_req zone=lab_sessions" in stream
    uploads = re.search(r"location /_stcore/upload_file/ \{(.*?)\}", conf, re.S).group(1)
    assert "limit_req zone=lab_uploads" in uploads and "proxy_pass http://attention_lab;" in uploads
    assert "proxy_set_header X-Real-IP $remote_addr;" in conf  # what the app rations new browser ids by
