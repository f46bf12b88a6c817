"""The class stores the tests run against: an SQLite file in a temporary folder, and a private redis-server on a free
port (Debian's redis-server, which .ci/run installs, with docker-compose.yml's options; skipped with a message where
it is missing, failed under CI)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

START_S = 20  # how long redis-server may take to answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compose_redis_options() -> list[str]:
    """The options of docker-compose.yml's redis service's command (there is no Docker daemon here: Debian's
    redis-server runs them)."""
    import yaml  # requirements-dev.txt

    compose = yaml.safe_load((Path(__file__).resolve().parent.parent / "docker-compose.yml").read_text())
    command = compose["services"]["redis"]["command"]
    assert command[0] == "redis-server", command
    return command[1:]


@contextmanager
def redis_server(folder: Path):
    """A redis-server of its own on loopback, its data in `folder`; yields its redis:// URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not installed (apt-get install redis-server): the Redis class store is untested"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    import redis

    port = free_port()
    # the options docker-compose.yml starts the deployment's Redis with, then this test's own place and port
    server = subprocess.Popen([binary, *compose_redis_options(), "--port", str(port), "--bind", "127.0.0.1",
                               "--dir", str(folder), "--save", "", "--protected-mode", "yes"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + START_S
    while True:  # wait on the server answering, not on a fixed time
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail(f"redis-server did not answer on port {port} within {START_S} s")
            time.sleep(0.05)
    try:
        yield url
    finally:
        client.close()
        server.terminate()
        server.wait(10)
