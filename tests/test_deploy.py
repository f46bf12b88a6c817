"""The several-replica deployment (issue 15, finding 7): every replica saves runs to one shared volume, and nginx
keeps a browser on one replica. Read from docker-compose.yml, the Dockerfile and deploy/nginx.conf (no Docker here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
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
