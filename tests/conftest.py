"""Shared fixtures: real servers started by the project's own code (app/embedded.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.embedded import EmbeddedKafka, EmbeddedRedis

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REFERENCE_STREAM = SHARED / "reference" / "paper_stream_delta5.json"


@pytest.fixture(scope="session")
def reference_stream_path() -> Path:
    if not REFERENCE_STREAM.exists():
        pytest.fail(f"the reference stream is missing: {REFERENCE_STREAM} (shared/ must sit beside the checkout)")
    return REFERENCE_STREAM


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A real Redis-protocol server (Valkey) with persistence; tests may stop and start it."""
    server = EmbeddedRedis(data_dir=tmp_path_factory.mktemp("valkey")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafka]:
    """A real Kafka-protocol broker (Tansu, memory only)."""
    broker = EmbeddedKafka(log_path=tmp_path_factory.mktemp("tansu") / "broker.log").start()
    yield broker
    broker.stop()
