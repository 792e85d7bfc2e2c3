"""Zone-aware requests at the codec (issue #29): rack-free requests answered byte for byte as before racks
existed, racks that make no request zone-aware changing nothing, the 422s of bad racks, the answer's zone fields,
and the compiled core's zone mode: a zone-aware request read and computed by it, answered as the reference does."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from app.codec.assign_input import CompiledInput, Limits, answer, decode_assign
from app.core import native
from app.core.algorithm import algorithms
from app.core.errors import AssignmentError

REFERENCE = Limits(max_partitions=10**6, max_dense_cells=10**7)
COMPILED = Limits(max_partitions=10**6, max_dense_cells=10**7, native=True)
CORES = [REFERENCE, *([COMPILED] if native.AVAILABLE else [])]


def rack_free_bodies() -> list[dict]:
    """Every registered algorithm on one instance with a previous assignment, sizing the group and with members
    (one of its own capacity); kip441 only with members (it needs them)."""
    rnd = random.Random(29)
    partitions = [
        {"topic": t, "partition": p, "rate": float(rnd.randint(0, 60)), "lag": float(rnd.randint(0, 500))}
        for t in ("orders", "events")
        for p in range(15)
    ]
    previous = {
        c: [{"topic": q["topic"], "partition": q["partition"]} for q in partitions[i::4]]
        for i, c in enumerate(["a", "b", "c", "c10"])
    }
    bodies = []
    for name in GOLDEN_ALGORITHMS:
        body: dict = {"algorithm": name, "capacity": 100, "partitions": partitions, "previous": previous}
        if name == "exact":
            body["params"] = {"time_limit_ms": 3000}
        if name == "kip441":
            lags = [{"topic": "orders", "partition": p, "lag": 10 * p} for p in range(5)]
            body["params"] = {"member_lags": {"a": lags, "b": lags}}
        else:
            bodies.append(body)
        bodies.append({**body, "members": ["a", {"id": "b", "capacity": 150}, "c", "d"]})
    return bodies


GOLDEN_ALGORITHMS = [
    *("nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp", "exact", "kip441"),
    *("least-loaded", "linear", "range", "repack", "roundrobin", "sticky"),
]
GOLDEN = [
    *("8564621508bb48a0", "0b9ba09c5408a5ed", "492c0690557f5e8c", "6db168488cdd4852", "cf6cae875a2cebbd"),
    *("8140d39a38005ef5", "81e788cba6577423", "73b3e3dcc273fe5f", "83c738f108293216", "e5e9e0ab63aaff3c"),
    *("7752012133e16e9c", "185d9a63c4ee1df4", "7481555a20e15d81", "bb1632dae399933d", "06a37fb1a9f16913"),
    *("82a502a4aab40aeb", "c7b6c9eab92085f6", "27907f970ec3b56a", "cf5e0f98383ae840", "0c611dcf4767528b"),
    *("4b2966db3d85c07b", "9327d28f4b096df4", "6e96c777bf06162d", "a55bdd2356ccc598", "70b9c9c924e6b1dc"),
    *("40a79c1761537a50", "aa3ddf4381f4a122", "1201fd65e1f50b91", "1482fcc9d2c29f60", "49b1aa968adaabda"),
    *("58b6e8d1c805a66f", "fc02bf7d8dcccba7", "20c9ca8f262d8b6f", "69ad8b22bce558d9", "079b358e585f28d9"),
    *("b902d8a5756c35c8", "0fd160b38b43959a", "65d91e0b7b6fa128", "a4d6e62ff504f69d"),
]
"""SHA-256 (first 16 hex digits) of each answer to `rack_free_bodies()`, computed by the code this change started
from (commit cc9ceff, before racks existed), by both cores; exact's wall-clock `phase_times` left out."""


def digest(raw: bytes) -> str:
    doc = json.loads(raw)
    if "phase_times" in doc["outputs"]:
        del doc["outputs"]["phase_times"]
        raw = json.dumps(doc).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def encoded(body: dict) -> bytes:
    return json.dumps(body).encode()


def test_the_golden_requests_cover_every_algorithm() -> None:
    assert set(GOLDEN_ALGORITHMS) == set(algorithms()) and len(GOLDEN) == len(rack_free_bodies())


@pytest.mark.parametrize("limits", CORES, ids=lambda limits: "compiled" if limits.native else "reference")
def test_rack_free_requests_are_answered_byte_for_byte_as_before_racks(limits: Limits) -> None:
    assert [digest(answer(encoded(body), limits)) for body in rack_free_bodies()] == GOLDEN


@pytest.mark.parametrize("name", ["mwf", "bfd", "repack", "exact", "nf", "least-loaded"])
def test_racks_that_make_no_request_zone_aware_change_no_byte(name: str) -> None:
    """Members with racks but partitions without, partitions with racks but members without: today's answer."""
    body = next(b for b in rack_free_bodies() if b["algorithm"] == name and "members" in b)
    expected = digest(answer(encoded(body), REFERENCE))
    member_racks = {**body, "members": [{"id": "a", "rack": "eu-1a"}, {"id": "b", "capacity": 150, "rack": "x"}, "c"]}
    member_racks["members"].append("d")
    partition_racks = {**body, "partitions": [{**p, "racks": ["eu-1a"]} for p in body["partitions"]]}
    for variant in (member_racks, partition_racks):
        raw = answer(encoded(variant), REFERENCE)
        assert digest(raw) == expected and b"cross_zone_rate" not in raw and b'"rack"' not in raw


def zone_body(**extra) -> dict:
    partitions = [
        {"topic": "t", "partition": p, "rate": 40.0, "racks": [("eu-1a", "eu-1b", "eu-1c")[p % 3]]} for p in range(6)
    ]
    return {"algorithm": "mwf", "capacity": 100, "partitions": partitions, **extra}


def test_a_zone_aware_answer_names_each_consumers_rack_and_the_cross_zone_rates() -> None:
    doc = json.loads(answer(encoded(zone_body()), REFERENCE))
    assert doc["cross_zone_rate"] == 0.0
    by_id = {c["id"]: c for c in doc["consumers"]}
    assert sorted(c["rack"] for c in by_id.values()) == ["eu-1a", "eu-1b", "eu-1c"]
    for consumer, held in doc["assignment"].items():
        assert by_id[consumer]["cross_zone_rate"] == 0.0
        assert all(by_id[consumer]["rack"] == ("eu-1a", "eu-1b", "eu-1c")[p["partition"] % 3] for p in held)


def test_members_racks_are_kept_and_what_cannot_be_local_is_counted() -> None:
    # eu-1c has no member: its partitions (t/2, t/5, 80 of rate) are read across zones wherever they go.
    members = [{"id": "a", "rack": "eu-1a"}, {"id": "b", "rack": "eu-1b"}, "c"]
    doc = json.loads(answer(encoded(zone_body(members=members)), REFERENCE))
    racks = {c["id"]: c["rack"] for c in doc["consumers"]}
    assert racks == {"a": "eu-1a", "b": "eu-1b", "c": None}
    assert doc["cross_zone_rate"] == 80.0
    assert sum(c["cross_zone_rate"] for c in doc["consumers"]) == 80.0


@pytest.mark.parametrize(
    ("change", "at"),
    [
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "racks": [""]}]}, "$.partitions[0].racks[0]"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "racks": ["r" * 256]}]}, "$.partitions[0].racks[0]"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "racks": [f"r{i}" for i in range(33)]}]}, None),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "racks": None}]}, "$.partitions[0].racks"),
        ({"partitions": [{"topic": "t", "partition": 0, "rate": 1, "racks": "eu-1a"}]}, "$.partitions[0].racks"),
        ({"members": [{"id": "a", "rack": ""}]}, "$.members[0].rack"),
        ({"members": [{"id": "a", "rack": 7}]}, "$.members[0].rack"),
        ({"previous_racks": {"a": ""}}, "$.previous_racks"),
    ],
)
def test_malformed_racks_are_invalid_racks(change: dict, at: str | None) -> None:
    with pytest.raises(AssignmentError) as caught:
        answer(encoded({**zone_body(), **change}), REFERENCE)
    assert caught.value.code == "invalid_racks"
    if at is not None:
        assert caught.value.details["at"].startswith(at)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"members": [{"id": "a", "rack": "eu-1a"}], "previous_racks": {"a": "eu-1a"}}, "with members"),
        ({"previous": {"x": [{"topic": "t", "partition": 0}]}, "previous_racks": {"y": "eu-1a"}}, "'y'"),
        ({"previous_racks": {"x": "eu-1a"}}, "not a consumer of the previous assignment"),
    ],
)
def test_racks_for_consumers_that_do_not_run_are_invalid_racks(change: dict, says: str) -> None:
    with pytest.raises(AssignmentError) as caught:
        answer(encoded({**zone_body(), **change}), REFERENCE)
    assert caught.value.code == "invalid_racks" and says in caught.value.message


def test_too_many_distinct_racks_are_invalid_racks() -> None:
    partitions = [{"topic": "t", "partition": p, "rate": 1.0, "racks": [f"rack-{p}"]} for p in range(1001)]
    with pytest.raises(AssignmentError) as caught:
        answer(encoded({"algorithm": "mwf", "capacity": 100, "partitions": partitions}), REFERENCE)
    assert caught.value.code == "invalid_racks" and "1001 distinct racks" in caught.value.message


def test_a_rack_listed_twice_counts_once() -> None:
    body = zone_body()
    twice = {**body, "partitions": [{**p, "racks": p["racks"] * 2} for p in body["partitions"]]}
    assert answer(encoded(twice), REFERENCE) == answer(encoded(body), REFERENCE)


@pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")
@pytest.mark.parametrize(
    "body",
    [
        zone_body(),
        {
            **zone_body(),
            "partitions": [{**p, "racks": []} for p in zone_body()["partitions"]],
            "members": [{"id": "a", "rack": "eu-1a"}],
        },
        zone_body(members=[{"id": "a", "rack": "eu-1a"}, {"id": "b", "capacity": 150, "rack": "eu-1b"}, "c"]),
        zone_body(previous={"a": [{"topic": "t", "partition": 0}], "c1": []}, previous_racks={"a": "eu-1b"}),
        zone_body(algorithm="bfd", previous={"a": [{"topic": "t", "partition": 0}]}, previous_racks={"a": "eu-1b"}),
    ],
    ids=["partition-racks", "member-rack", "members-racks", "previous-racks", "bfd"],
)
def test_requests_with_racks_are_read_and_computed_by_the_compiled_core(body: dict) -> None:
    """A request naming racks is read into the compiled core's arrays and answered byte for byte as the reference
    answers it (the zone fields included)."""
    assert isinstance(decode_assign(encoded(body), COMPILED), CompiledInput)
    assert answer(encoded(body), COMPILED) == answer(encoded(body), REFERENCE)


@pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")
@pytest.mark.parametrize(
    "change",
    [
        {"members": [{"id": "a", "rack": "eu-1a"}], "previous_racks": {"a": "eu-1a"}},
        {"previous": {"x": [{"topic": "t", "partition": 0}]}, "previous_racks": {"y": "eu-1a"}},
        {"previous_racks": {"x": "eu-1a"}},
    ],
)
def test_racks_the_compiled_core_does_not_take_get_the_references_error(change: dict) -> None:
    body = encoded(zone_body(**change))
    with pytest.raises(AssignmentError) as compiled:
        answer(body, COMPILED)
    with pytest.raises(AssignmentError) as reference:
        answer(body, REFERENCE)
    assert (compiled.value.code, compiled.value.message) == (reference.value.code, reference.value.message)


@pytest.mark.skipif(not native.AVAILABLE, reason="the compiled core is not installed")
@pytest.mark.parametrize("given", [None, {"b": "eu-1c"}], ids=["stored", "previous_racks-first"])
def test_the_racks_stored_with_a_group_are_the_previous_consumers_racks(given: dict | None) -> None:
    """Without previous_racks, the racks stored with the group's version count for its previous consumers (and
    only for them); what is stored of the answer (its racks and cross-zone rate) is the reference's."""
    body = zone_body(group="g", **({"previous_racks": given} if given else {}))
    stored = json.dumps({"a": [["t", 0], ["t", 3]], "b": [["t", 1]], "c": [["t", 2], ["t", 5]]}).encode()
    racks = {"a": "eu-1a", "b": "eu-1a", "gone": "eu-1b"}
    decoded = decode_assign(encoded(body), COMPILED)
    assert isinstance(decoded, CompiledInput)
    compiled = decoded.completed(stored, None, None, racks).compute(COMPILED)
    reference = decode_assign(encoded(body), REFERENCE).completed(stored, None, None, racks).compute(REFERENCE)
    assert compiled.racks and compiled.cross_zone_rate is not None
    assert (compiled.answer, compiled.assignment, compiled.loads, compiled.racks, compiled.cross_zone_rate) == (
        reference.answer,
        reference.assignment,
        reference.loads,
        reference.racks,
        reference.cross_zone_rate,
    )
