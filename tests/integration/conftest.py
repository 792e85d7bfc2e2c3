"""Fixtures of the integration tests that several modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.local.java_clients import JavaBuild, build
from app.local.kafka import ApacheKafka, KafkaSetupError
from tests.conftest import LiveService


@pytest.fixture(scope="session")
def java_build() -> JavaBuild:
    """`mvn verify` once for the session: the jar, the unit tests (Surefire), the test programs' classpath."""
    try:
        return build("verify")
    except KafkaSetupError as error:
        pytest.fail(str(error))


def broker_assignor(url: str, **more: object) -> dict[str, object]:
    """Broker properties that offer GroupfitBrokerAssignor to KIP-848 groups, asking groupfit at `url`, capacity 100
    (and `more`)."""
    return {
        "group.consumer.assignors": "uniform,range,io.groupfit.kafka.GroupfitBrokerAssignor",
        "groupfit.url": url,
        "groupfit.capacity": 100,
        # The coordinator's own thread runs the assignor, as without KIP-1263's offload.
        "group.consumer.assignor.offload.enable": "false",
        # The rates and the group's state read again every second (10 s by default), so a test need not wait.
        "groupfit.refresh.ms": 1000,
        **more,
    }


@pytest.fixture(scope="session")
def rack_cluster(
    java_build: JavaBuild, live_service: LiveService, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApacheKafka]:
    """Three brokers in racks a, b and c (and a controller), for the placement tests and the zone tests: each broker
    has GroupfitBrokerAssignor on its classpath for KIP-848 groups, asking the live service (BFD, capacity 100)."""
    kafka = ApacheKafka(
        tmp_path_factory.mktemp("kafka3"),
        brokers=3,
        racks=("a", "b", "c"),
        extra_classpath=[java_build.jar],
        # BFD answers the same whatever the previous assignment: groups that joined differently compare exactly.
        properties=broker_assignor(live_service.url, **{"groupfit.algorithm": "bfd"}),
    )
    # The controller reads the same properties and configures the assignor too: it has no client listener of its
    # own to take the Admin client's bootstrap from.
    kafka.properties["groupfit.bootstrap.servers"] = kafka.bootstrap_servers
    with kafka:
        yield kafka
