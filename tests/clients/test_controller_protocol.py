"""The control topic's messages: their wire form (what consumers and controllers of any version read) and
decoding, which skips records that are not messages."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, KafkaException
from groupfit_client import TopicPartition
from groupfit_client.controller.protocol import EVERY_CONSUMER, Message, end_offset


@pytest.mark.parametrize(
    ("message", "wire"),
    [
        (Message("hello", "c0"), {"type": "hello", "consumer": "c0"}),
        (Message("sync", EVERY_CONSUMER, "id1"), {"type": "sync", "consumer": "*", "command_id": "id1"}),
        (
            Message("stop", "c1", "id2", (TopicPartition("t", 0), TopicPartition("t", 3))),
            {"type": "stop", "consumer": "c1", "command_id": "id2", "partitions": [["t", 0], ["t", 3]]},
        ),
        (Message("quit", "c2", "id3", ()), {"type": "quit", "consumer": "c2", "command_id": "id3", "partitions": []}),
        (
            Message("state", "c1", "id1", (TopicPartition("u", 2),)),
            {"type": "state", "consumer": "c1", "command_id": "id1", "partitions": [["u", 2]]},
        ),
    ],
)
def test_messages_keep_their_wire_form_and_decode_back(message, wire):
    assert json.loads(message.encode()) == wire
    decoded = Message.decode(message.encode())
    assert decoded == message
    assert all(isinstance(tp, TopicPartition) for tp in decoded.partitions or ())


@pytest.mark.parametrize(
    "value", [b"not json", b"[1, 2]", b'{"type": "ack"}', b'{"type": "ack", "consumer": "c", "partitions": [1]}']
)
def test_records_that_are_not_messages_are_skipped(value):
    assert Message.decode(value) is None


class LeaderElectedLate:
    """A consumer whose broker answers `errors` NOT_LEADER_FOR_PARTITION first, as for a topic just created."""

    def __init__(self, errors: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION) -> None:
        self.errors, self.code, self.calls = errors, code, 0

    def get_watermark_offsets(self, partition, timeout):
        self.calls += 1
        if self.calls <= self.errors:
            raise KafkaException(KafkaError(self.code))
        return (0, 7)


def test_the_end_offset_is_asked_again_while_the_new_topic_has_no_leader():
    consumer = LeaderElectedLate(errors=3)
    assert end_offset(consumer, ("control", 0), timeout=10) == 7
    assert consumer.calls == 4


def test_the_end_offset_raises_what_waiting_cannot_mend_and_stops_waiting_at_its_timeout():
    with pytest.raises(KafkaException):
        end_offset(LeaderElectedLate(errors=1, code=KafkaError.TOPIC_AUTHORIZATION_FAILED), ("control", 0), 10)
    never_elected = LeaderElectedLate(errors=10**9)
    with pytest.raises(KafkaException):
        end_offset(never_elected, ("control", 0), timeout=0.3)
    assert 2 <= never_elected.calls <= 5
