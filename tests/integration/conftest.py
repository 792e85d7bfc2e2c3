"""Fixtures of the integration tests that several modules share."""

from __future__ import annotations

import pytest

from app.local.java_clients import JavaBuild, build
from app.local.kafka import KafkaSetupError


@pytest.fixture(scope="session")
def java_build() -> JavaBuild:
    """`mvn verify` once for the session: the jar, the unit tests (Surefire), the test programs' classpath."""
    try:
        return build("verify")
    except KafkaSetupError as error:
        pytest.fail(str(error))
