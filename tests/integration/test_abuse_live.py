"""Issue #13 against `groupfit serve` itself (uvicorn, real sockets): a request without a token is refused
before its body is read, and a client that goes away stops its computation (its worker is killed)."""

from __future__ import annotations

import json
import random
import socket
import time
from pathlib import Path

import pytest

from tests.conftest import LiveService

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def service(redis_server, tmp_path_factory):
    live = LiveService(
        redis_server.url,
        tmp_path_factory.mktemp("abuse") / "service.log",
        GROUPFIT_AUTH_TOKENS=json.dumps([{"token": TOKEN, "write": True}]),
        GROUPFIT_COMPUTE_WORKERS="1",
        GROUPFIT_COMPUTE_TIMEOUT_S="60",
    ).start()
    yield live
    live.stop()


def request_head(path: str, length: int, token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n{auth}"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def workers(pid: int) -> set[int]:
    """The compute workers among the service's child processes."""
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread ended meanwhile
            continue
        for child in children:
            try:
                if b"app.service.compute" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.add(int(child))
            except OSError:  # the child ended meanwhile (gone, or reaped as it was read)
                pass
    return found


def wait_for(condition, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_request_without_a_token_is_refused_before_its_body_is_read(service):
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as client:
        # 57 MB announced, one byte sent: an answer can only come from a server that did not wait for the rest
        client.sendall(request_head("/v1/assign", 57_000_000) + b"{")
        answer = b""
        while b'"unauthorized"' not in answer and (chunk := client.recv(65536)):  # head and body may come apart
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b'"unauthorized"' in answer


def test_a_client_that_goes_away_stops_its_computation(service):
    assert wait_for(lambda: len(workers(service.process.pid)) == 1)
    (worker,) = workers(service.process.pid)
    rng = random.Random(1)
    stream = [{"t": {str(p): rng.uniform(1, 60) for p in range(200)}} for _ in range(600)]
    # repack's replay is the reference's (the paper algorithms replay compiled, in a fraction of a second)
    body = json.dumps({"stream": stream, "capacity": 100, "algorithms": ["repack"]}).encode()  # seconds of replay
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as client:
        client.sendall(request_head("/v1/evaluate", len(body), TOKEN) + body)
        time.sleep(1.0)  # the worker is busy with it
        assert workers(service.process.pid) == {worker}
    # the connection is closed: the worker is killed, and a fresh one takes its place
    assert wait_for(lambda: worker not in workers(service.process.pid))
    assert wait_for(lambda: len(workers(service.process.pid)) == 1)
