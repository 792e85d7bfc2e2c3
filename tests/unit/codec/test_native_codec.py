"""The compiled request reader and answer writer (native/src/input.rs, answer.rs) against the reference codec:
on random requests of every compiled algorithm the answer's bytes are the same; on broken requests (each of the
ways a body can be wrong) the error is the same — the compiled reader declines what it does not take, and the
reference says what is wrong — and a request it takes means what the reference reads in it."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from app.codec.assign import DeltaForm
from app.codec.assign_input import CompiledInput, Limits, ReferenceComputation, answer, decode_assign
from app.core import native
from app.core.errors import AssignmentError
from app.settings import Settings

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")

COMPILED = Limits.of(Settings(core="native"))
REFERENCE = Limits.of(Settings(core="python"))
TOPICS = ["t", "orders", "a/b", 'q"uote', "ü-topic", "tab\there", "x" * 255]
IDS = ["c0", "c1", "c2", "c10", "a", "b7", "b7x", "surplus-0", "m1", "m2", "m10", "c\\1", "ctl\u0001", "c01", "m001"]
RACKS = ["eu-1a", "eu-1b", "eu-1c", 'r"q', "ü"]


def outcome(body: bytes, limits: Limits, delta: DeltaForm = "sparse") -> tuple[Any, ...]:
    try:
        return ("answer", answer(body, limits, delta))
    except AssignmentError as error:
        return ("error", error.code, error.message, error.details)


def request(rnd: random.Random, algorithm: str) -> dict[str, Any]:
    """A request; about half zone-aware: partitions with racks (some without), members with a rack or not, or
    without members previous_racks (the answer names the racks of new consumers too)."""
    zoned = rnd.random() < 0.5
    capacity = rnd.choice([100, 100.0, 60.0, 250.5])
    pool = [(t, p) for t in rnd.sample(TOPICS, rnd.randint(1, 3)) for p in range(10)]
    keys = rnd.sample(pool, rnd.randint(0, min(24, len(pool))))

    def rate() -> float | int:
        kind = rnd.random()
        if kind < 0.4:
            return rnd.choice([0, 10, 20, 25, 40, 60])  # ties, and integers in the JSON
        if kind < 0.5:
            return float(capacity) * rnd.uniform(1.0, 1.8)
        return rnd.uniform(0, float(capacity))

    partitions: list[dict[str, Any]] = []
    for topic, partition in keys:
        entry: dict[str, Any] = {"topic": topic, "partition": partition, "rate": rate()}
        if rnd.random() < 0.3:
            entry["lag"] = rnd.choice([None, 0, rnd.uniform(0, 300)])
        if zoned and rnd.random() < 0.85:
            entry["racks"] = rnd.sample(RACKS, rnd.choice([0, 1, 1, 1, 2, 3]))
        partitions.append(entry)
    body: dict[str, Any] = {"algorithm": algorithm, "partitions": partitions}
    if rnd.random() < 0.8:
        body["capacity"] = capacity
    else:
        body["consumer_throughput"], body["iteration_s"] = float(capacity) * 1.25, 30
    owners = rnd.sample(IDS, rnd.randint(0, 6))
    if owners:
        previous: dict[str, list[dict[str, Any]]] = {c: [] for c in owners}
        for topic, partition in [k for k in keys if rnd.random() < 0.8] + [
            ("gone", p) for p in range(rnd.randint(0, 2))
        ]:
            previous[rnd.choice(owners)].append({"topic": topic, "partition": partition})
        body["previous"] = previous
        if zoned and rnd.random() < 0.6:
            body["previous_racks"] = {c: rnd.choice(RACKS) for c in owners if rnd.random() < 0.7}
    if rnd.random() < 0.4:
        members = rnd.sample(IDS, rnd.randint(1, 5))
        body["members"] = [
            m if rnd.random() < 0.5 else {"id": m, "capacity": rnd.choice([50, 100.0, 75.5])} for m in members
        ]
        if zoned:
            body.pop("previous_racks", None)
            body["members"] = [member_with_rack(rnd, m) if rnd.random() < 0.7 else m for m in body["members"]]
    if algorithm.startswith("m") and rnd.random() < 0.5:
        body["params"] = {"max_rscore": rnd.choice([0.0, 0.5, 2]), "max_moves": rnd.randint(0, 4)}
    if algorithm == "least-loaded" and rnd.random() < 0.5:
        body["params"] = {"w_sla": rnd.choice([0.5, 5.0]), "rebalance_s": rnd.choice([0, 5.0])}
    if rnd.random() < 0.2:
        body["group"] = "g-1"  # named, not stored: answered with the group
    return body


def member_with_rack(rnd: random.Random, member: str | dict[str, Any]) -> dict[str, Any]:
    return {**({"id": member} if isinstance(member, str) else member), "rack": rnd.choice(RACKS)}


def encoded(body: Any, rnd: random.Random) -> bytes:
    """JSON as clients write it: compact or spaced, non-ASCII escaped or not."""
    return json.dumps(body, ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 1])).encode()


@pytest.mark.parametrize("algorithm", sorted(native.ALGORITHMS))
def test_the_compiled_codec_answers_byte_for_byte_as_the_reference(algorithm: str) -> None:
    rnd = random.Random(algorithm)
    compiled = zone_aware = 0
    for i in range(1500):
        body = encoded(request(rnd, algorithm), rnd)
        compiled += isinstance(decode_assign(body, COMPILED), CompiledInput)
        delta: DeltaForm = "none" if i % 4 == 3 else "sparse"  # the answer without its delta, written alike
        reference = outcome(body, REFERENCE, delta)
        assert outcome(body, COMPILED, delta) == reference, f"request {i} ({delta}): {body!r}"
        zone_aware += reference[0] == "answer" and b'"cross_zone_rate"' in reference[1]
    assert compiled > 1200  # most took the compiled way (ids with a control character, … do not)
    assert zone_aware > 400  # and many of them were zone-aware


def _set(path: list[Any], value: Any) -> Any:
    def change(body: dict[str, Any]) -> None:
        target: Any = body
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


BROKEN: dict[str, Any] = {
    "negative rate": _set(["partitions", 0, "rate"], -1),
    "rate as text": _set(["partitions", 0, "rate"], "5"),
    "rate true": _set(["partitions", 0, "rate"], True),
    "rate null": _set(["partitions", 0, "rate"], None),
    "negative lag": _set(["partitions", 0, "lag"], -0.5),
    "partition below 0": _set(["partitions", 0, "partition"], -1),
    "partition above 2^31-1": _set(["partitions", 0, "partition"], 2**31),
    "partition 1.5": _set(["partitions", 0, "partition"], 1.5),
    "empty topic": _set(["partitions", 0, "topic"], ""),
    "topic of 256": _set(["partitions", 0, "topic"], "é" * 256),
    "unknown partition field": _set(["partitions", 0, "size"], 3),
    "partitions null": _set(["partitions"], None),
    "partitions an object": _set(["partitions"], {}),
    "duplicate partition": lambda b: b["partitions"].append(dict(b["partitions"][0])),
    "previous partition twice": lambda b: b["previous"]["c2"].append(b["previous"]["c1"][0]),
    "previous gone partition twice": lambda b: (
        b["previous"]["c2"].append({"topic": "x", "partition": 1})
        or b["previous"]["c1"].append({"topic": "x", "partition": 1})
    ),
    "empty consumer id": _set(["previous", ""], []),
    "previous null list": _set(["previous", "c3"], None),
    "previous ref with rate": _set(["previous", "c1", 0, "rate"], 1),
    "members empty": _set(["members"], []),
    "members twice": _set(["members"], ["m1", "m1"]),
    "member capacity 0": _set(["members"], ["m1", {"id": "m2", "capacity": 0}]),
    "member capacity text": _set(["members"], [{"id": "m2", "capacity": "1"}]),
    "member with extra field": _set(["members"], [{"id": "m2", "capacity": 1, "x": 1}]),
    "member id of 256": _set(["members"], ["m" * 256]),
    "ids with leading zeros": _set(["members"], ["c01", "c1"]),
    "non-ASCII id": _set(["previous", "é1"], []),
    "rates summing past the largest float": lambda b: [p.update(rate=1.7e308) for p in b["partitions"]],
    "rates whose exact sum overflows": lambda b: [  # added one by one they stay at the largest float
        p.update(rate=r) for p, r in zip(b["partitions"], [1.7976931348623157e308, 7.98e291, 7.98e291])
    ],
    "capacity 0": _set(["capacity"], 0),
    "capacity text": _set(["capacity"], "100"),
    "no capacity": lambda b: b.pop("capacity"),
    "unknown algorithm": _set(["algorithm"], "nope"),
    "an algorithm the compiled core does not run": _set(["algorithm"], "sticky"),
    "unknown field": _set(["colour"], "red"),
    "bad params": _set(["params"], {"max_moves": -1}),
    "too many consumers": _set(["capacity"], 1e-9),
    "group with a space": _set(["group"], "a b"),
    "racks null": _set(["partitions", 0, "racks"], None),
    "racks a string": _set(["partitions", 0, "racks"], "eu-1a"),
    "empty rack": _set(["partitions", 0, "racks"], [""]),
    "rack of 256": _set(["partitions", 0, "racks"], ["é" * 256]),
    "33 racks": _set(["partitions", 0, "racks"], [f"r{i}" for i in range(33)]),
    "1024 distinct racks": lambda b: b["partitions"].extend(
        {"topic": "u", "partition": j, "rate": 1, "racks": [f"r{j}-{i}" for i in range(32)]} for j in range(32)
    ),
    "member rack empty": _set(["members"], [{"id": "m1", "rack": ""}]),
    "member rack null": _set(["members"], [{"id": "m1", "rack": None}]),
    "previous_racks with members": _set(["previous_racks"], {"c1": "eu-1a"}),
    "previous_racks of a stranger": lambda b: b.pop("members") and b.update(previous_racks={"x": "eu-1a"}),
    "previous_racks null": _set(["previous_racks"], None),
}


VALID = {"an algorithm the compiled core does not run", "non-ASCII id", "ids with leading zeros"}
"""Not broken: requests the reference answers; the compiled core leaves all but the last to it."""


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_request_gets_the_reference_error(case: str) -> None:
    body: dict[str, Any] = {
        "algorithm": "mwf",
        "capacity": 100,
        "partitions": [{"topic": "t", "partition": p, "rate": 30 + p, "lag": 1} for p in range(6)],
        "previous": {"c1": [{"topic": "t", "partition": 0}], "c2": [{"topic": "t", "partition": 1}], "c3": []},
        "members": ["m1", "m2"],
    }
    BROKEN[case](body)
    encoded = json.dumps(body).encode()
    reference = outcome(encoded, REFERENCE)
    assert reference[0] == ("answer" if case in VALID else "error"), reference
    assert outcome(encoded, COMPILED) == reference
    if case in VALID:
        assert isinstance(decode_assign(encoded, COMPILED), CompiledInput) == (case == "ids with leading zeros")


@pytest.mark.parametrize(
    "text",
    [
        b'{"algorithm":"mwf","capacity":100,"partitions":[],"partitions":[]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[{"topic":"t","topic":"u","partition":0,"rate":1}]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[],"params":{"a":1,"a":2}}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[],"previous":{"c1":[],"c1":[]}}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[{"topic":"t","partition":0,"rate":1,"racks":[],"racks":[]}]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[],"members":[{"id":"a","rack":"x","rack":"y"}]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[]} x',
        b'{"algorithm":"mwf","capacity":100,"partitions":[{"topic":"t","partition":0,"rate":1e400}]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[{"topic":"t\xff","partition":0,"rate":1}]}',
        b'{"algorithm":"mwf","capacity":100,"partitions":[{"topic":"\\ud800","partition":0,"rate":1}]}',
        b'[{"algorithm":"mwf"}]',
        b"",
    ],
)
def test_broken_json_gets_the_reference_error(text: bytes) -> None:
    reference = outcome(text, REFERENCE)
    assert reference[0] == "error"
    assert outcome(text, COMPILED) == reference


def test_what_the_compiled_reader_takes_means_the_same() -> None:
    """Escapes, integers as rates, -0 and exponents are read as msgspec reads them."""
    text = (
        b'{"p\\u0061rtitions":[{"topic":"t\\u00e9\\n","partition":0,"rate":1E2,"lag":null},'
        b'{"partition":1,"topic":"t\\u00e9\\n","rate":-0.0},{"topic":"t\\u00e9\\n","partition":2,"rate":9007199254740993}],'
        b'"capacity":1e17,"algorithm":"bfd","previous":{"c\\u0031":[{"topic":"t\\u00e9\\n","partition":2}]}}'
    )
    decoded = decode_assign(text, COMPILED)
    assert isinstance(decoded, CompiledInput) and decoded.bulk.size == 3 and decoded.request.capacity == 1e17
    assert outcome(text, COMPILED) == outcome(text, REFERENCE)
    answer = msgspec.json.decode(outcome(text, COMPILED)[1])
    assert {"topic": "té\n", "partition": 2} in answer["assignment"]["c1"]


@pytest.mark.parametrize("algorithm", ["mwf", "bfd", "mbfp", "least-loaded"])
def test_what_a_group_stores_is_the_same(algorithm: str) -> None:
    """For a group, the stored assignment, each consumer's load stored beside it (the answer's), the history's
    moves and the figures come out of the compiled core as the reference computes them (`ReferenceComputation`),
    with the group in the answer."""
    import msgspec.structs

    from app.codec.assign import AssignRequest, capacity_of, previous_of

    rnd = random.Random(f"group-{algorithm}")
    compared = 0
    for _ in range(200):
        body = request(rnd, algorithm)
        body["group"] = "orders"
        text = json.dumps(body).encode()
        decoded = decode_assign(text, COMPILED)
        if not isinstance(decoded, CompiledInput):
            continue
        reference = msgspec.json.decode(text, type=AssignRequest)
        lean = msgspec.structs.replace(reference, partitions=None, previous=None)
        assert reference.partitions is not None
        job = ReferenceComputation(
            lean, reference.partitions, None, previous_of(reference) or {}, capacity_of(reference)
        )
        try:
            expected = job.compute(REFERENCE)
        except AssignmentError as error:
            with pytest.raises(AssignmentError) as raised:
                decoded.completed(None, None, None).compute(COMPILED)
            assert (raised.value.code, raised.value.message) == (error.code, error.message)
            continue
        computed = decoded.completed(None, None, None).compute(COMPILED)
        computed.seconds = expected.seconds = 0.0
        assert computed == expected
        answered = msgspec.json.decode(computed.answer)["consumers"]
        assert msgspec.json.decode(computed.loads) == {c["id"]: c["load"] for c in answered}
        compared += 1
    assert compared > 150


def stored_outcome(body: bytes, limits: Limits, stored: bytes | None) -> tuple[Any, ...]:
    """The answer (or error) to a request of group "g-1" whose stored rates are `stored` (the JSON kept by PUT
    /v1/groups/{group}/rates), nothing else stored."""
    try:
        return ("answer", decode_assign(body, limits).completed(None, None, stored).compute(limits).answer)
    except AssignmentError as error:
        return ("error", error.code, error.message, error.details)


@pytest.mark.parametrize("algorithm", ["mwf", "bfd", "least-loaded"])
def test_partitions_without_a_rate_take_the_stored_ones_alike(algorithm: str) -> None:
    """A partition given without its rate takes its group's stored rate (and stored lag unless it gives one), 0 if
    none is stored; none stored for any: no_rates. The compiled reader fills them as the reference does, and the
    answer is the one to the same request with the rates written in."""
    rnd = random.Random(f"unrated-{algorithm}")
    filled = compiled = 0
    for i in range(400):
        body = request(rnd, algorithm)
        body["group"] = "g-1"
        given = body["partitions"]
        stored = [
            {"topic": p["topic"], "partition": p["partition"], "rate": rnd.uniform(0, 90)}
            | ({"lag": rnd.uniform(0, 50)} if rnd.random() < 0.5 else {})
            for p in given
            if rnd.random() < 0.8
        ] + [{"topic": "elsewhere", "partition": p, "rate": 5.0} for p in range(rnd.randint(0, 2))]
        document = msgspec.json.encode({"partitions": stored, "window_end": "w", "updated_at": "u"})
        unrated = [p for p in given if rnd.random() < 0.7]
        for partition in unrated:
            del partition["rate"]
        text = encoded(body, rnd)
        decoded = decode_assign(text, COMPILED)
        if isinstance(decoded, CompiledInput) and decoded.needs_rates:
            compiled += decoded.bulk.fill_rates(document) == (len(unrated), len({*keys(unrated)} & {*keys(stored)}))
        reference = stored_outcome(text, REFERENCE, document)
        assert stored_outcome(text, COMPILED, document) == reference, f"request {i}: {body!r} {document!r}"
        if unrated:
            assert stored_outcome(text, REFERENCE, None)[:2] == ("error", "no_rates")
        if reference[0] == "error" or not unrated:
            continue
        by_key = {(p["topic"], p["partition"]): p for p in stored}
        for partition in unrated:
            kept = by_key.get((partition["topic"], partition["partition"]), {})
            partition["rate"] = kept.get("rate", 0.0)
            if partition.get("lag") is None and "lag" in kept:
                partition["lag"] = kept["lag"]
        assert reference == stored_outcome(json.dumps(body).encode(), REFERENCE, None)
        filled += 1
    assert filled > 150 and compiled > 150  # and the compiled reader filled most


def keys(partitions: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(p["topic"], p["partition"]) for p in partitions]


def test_stored_rates_too_large_for_the_event_loop_are_read_where_computed() -> None:
    """Rates stored for many partitions (over READ_INLINE_BYTES of JSON) are not read by the compiled reader on the
    event loop: the request goes the reference's way, whose computation runs off it (in a compute worker), with
    the same answer."""
    from app.codec.assign_input import ReferenceComputation
    from app.codec.wire import READ_INLINE_BYTES

    body = json.dumps(
        {
            "algorithm": "mwf",
            "capacity": 100,
            "group": "g-1",
            "partitions": [{"topic": "t", "partition": p} for p in range(3)],
        }
    ).encode()
    stored = [{"topic": "t", "partition": p, "rate": 30.0 + p} for p in range(3)]
    stored += [{"topic": "elsewhere", "partition": p, "rate": 1.0} for p in range(40_000)]
    document = msgspec.json.encode({"partitions": stored, "window_end": "w", "updated_at": "u"})
    assert len(document) > READ_INLINE_BYTES
    computation = decode_assign(body, COMPILED).completed(None, None, document)
    assert isinstance(computation, ReferenceComputation) and not computation.inline(COMPILED)
    assert stored_outcome(body, COMPILED, document) == stored_outcome(body, REFERENCE, document)
    small = msgspec.json.encode({"partitions": stored[:3], "window_end": "w", "updated_at": "u"})
    assert stored_outcome(body, COMPILED, document) == stored_outcome(body, COMPILED, small)


def test_a_request_of_stored_rates_that_knows_none_is_no_rates() -> None:
    body = json.dumps(
        {"algorithm": "mwf", "capacity": 10, "group": "g-1", "partitions": [{"topic": "t", "partition": 0}]}
    )
    document = b'{"partitions":[{"topic":"u","partition":0,"rate":3.0}],"window_end":"w","updated_at":"u"}'
    for limits in (COMPILED, REFERENCE):
        assert stored_outcome(body.encode(), limits, document)[:2] == ("error", "no_rates")
        mixed = body.replace('"partition": 0}', '"partition": 0}, {"topic": "t", "partition": 1, "rate": 2}')
        assert stored_outcome(mixed.encode(), limits, document)[0] == "answer"  # one rate known: the other is 0


@pytest.mark.parametrize("repeated", [False, True])
def test_an_object_of_many_keys_gets_the_reference_error(repeated: bool) -> None:
    """Issue #27: 100 000 distinct keys in `params` (1.8 MB; the compiled reader's duplicate-key check was
    quadratic, 13 s at 85 000: now linear, see json.rs's tests and bench/native.py), and the same with the
    first key repeated last: read by the compiled reader or declined by it, the reference's error."""
    params = {f"key-{i}": i for i in range(100_000)}
    text = msgspec.json.encode({"algorithm": "mwf", "capacity": 100, "partitions": [], "params": params})
    if repeated:
        text = text[:-2] + b',"key-0":1}}'
    assert (native.parse_assign(text) is None) == repeated
    reference = outcome(text, REFERENCE)
    assert reference[:2] == ("error", "invalid_json" if repeated else "invalid_parameter")
    assert outcome(text, COMPILED) == reference
