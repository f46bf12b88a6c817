"""The class store of the several-replica deployment (issue 39): docker-compose.yml starts one Redis, keeps its data
in a volume, and points every replica at it with the one setting. Read from the file (no Docker here)."""

from __future__ import annotations

from pathlib import Path

import yaml  # requirements-dev.txt

from core.serving.classroom_store import STORE_SETTING, RedisStore, open_store

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
REPLICAS = {name: service for name, service in COMPOSE["services"].items() if service.get("image") == "attention-lab"}


def test_every_replica_uses_the_one_redis():
    redis = COMPOSE["services"]["redis"]
    assert redis["image"].startswith("redis:7")  # the store's Lua scripts use EXPIRETIME (Redis 7)
    settings = {service["environment"][STORE_SETTING] for service in REPLICAS.values()}
    assert settings == {"redis://redis:6379/0"} and len(REPLICAS) >= 2
    assert isinstance(open_store(settings.pop()), RedisStore)
    for name, service in REPLICAS.items():
        assert service["depends_on"]["redis"]["condition"] == "service_healthy", f"{name} may start before Redis"


def test_redis_keeps_the_classes_across_a_restart():
    redis = COMPOSE["services"]["redis"]
    assert "--appendonly" in redis["command"] and "yes" in redis["command"]
    volumes = [v.split(":") for v in redis["volumes"]]
    assert ["classes", "/data"] in volumes and "classes" in COMPOSE["volumes"]
