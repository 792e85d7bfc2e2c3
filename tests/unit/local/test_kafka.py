"""The cluster id groupfit formats a local Apache Kafka with (app/local/kafka.py)."""

from __future__ import annotations

import base64

from app.local.kafka import random_cluster_id


def test_a_cluster_id_is_never_read_as_an_option():
    """Kafka's storage tool reads an id starting with "-" as an option (1 in 64 ids would): such an id is drawn
    again, as Kafka's Uuid.randomUuid() does. Each id is still 16 bytes in URL-safe base64, and fresh."""
    ids = [random_cluster_id() for _ in range(2000)]
    assert not any(cluster_id.startswith("-") for cluster_id in ids)
    assert all(len(base64.urlsafe_b64decode(cluster_id + "==")) == 16 for cluster_id in ids)
    assert len(set(ids)) == len(ids)
