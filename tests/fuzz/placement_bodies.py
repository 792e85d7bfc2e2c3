"""Placement bodies as an adversary writes them, and what every answer to one must be: the deterministic fuzz
(tests/fuzz/test_placement_fuzz.py) and the long campaign (bench/fuzz.py --target placement) share them.

`extreme_bodies()` is a fixed list: the example request with one number (or every broker's, or every
partition's) replaced by each extreme value — zero, negative, subnormal, the largest double, past it, past
2^53 and 2^63, strings, null — plus the structural cases (no brokers, duplicate ids, mixed racks, unknown and
repeated replicas). `random_body(rng)` draws a body whose numbers span every magnitude and are extreme now and
then, so most reach the solvers and some are refused. `problems(...)` names what is wrong with an answer."""

from __future__ import annotations

import copy
import io
import json
import math
import random
import sys
from collections.abc import Iterator
from typing import Any

from app.api.examples import PLACEMENT_REQUEST
from app.core.errors import ErrorCode

_TOKENS = ("1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1E309", "-0")


class Raw:
    """A JSON token Python's json does not write (1e400, NaN): written as is."""

    def __init__(self, token: str) -> None:
        self.token = token


EXTREMES: list[Any] = [
    0,
    -0.0,
    -1,
    1,
    5e-324,
    2.2250738585072014e-308,
    1e-300,
    1e-9,
    0.001,
    0.0009,
    0.5,
    1.5,
    1000,
    2**31 - 1,
    2**31,
    2**53,
    2**53 + 1,
    9.1e15,
    1e12,
    1.0000001e12,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
    1e300,
    1.7976931348623157e308,
    *(Raw(token) for token in _TOKENS),
    None,
    True,
    "1",
    [],
]

FIELDS = [
    ("brokers", 0, "id"),
    ("brokers", 0, "disk"),
    ("brokers", 0, "network"),
    ("brokers", 0, "rack"),
    ("brokers", "*", "disk"),
    ("brokers", "*", "network"),
    ("topics", 0, "retention_ms"),
    ("partitions", 0, "partition"),
    ("partitions", 0, "size"),
    ("partitions", 0, "throughput"),
    ("partitions", "*", "size"),
    ("partitions", "*", "throughput"),
    ("options", None, "time_limit_ms"),
    ("options", None, "max_bytes_moved"),
    ("options", None, "max_utilization"),
]


def encode(body: Any) -> bytes:
    """JSON with the Raw tokens in place."""
    raws: list[str] = []

    def default(value: Any) -> str:
        if isinstance(value, Raw):
            raws.append(value.token)
            return f"\x00raw{len(raws) - 1}\x00"
        raise TypeError(type(value))

    text = json.dumps(body, default=default, allow_nan=False)
    for i, token in enumerate(raws):
        text = text.replace(f'"\\u0000raw{i}\\u0000"', token)
    return text.encode()


def extreme_bodies() -> Iterator[tuple[str, Any]]:
    """(what it is, body): the example with one field set to each extreme, then the structural cases."""
    for section, index, name in FIELDS:
        for value in EXTREMES:
            body = copy.deepcopy(PLACEMENT_REQUEST)
            if section == "options":
                targets = [body["options"]]
            elif index == "*":
                targets = body[section]
            else:
                targets = [body[section][index]]
            for target in targets:
                target[name] = value
            label = value.token if isinstance(value, Raw) else repr(value)
            yield f"{section}[{index}].{name} = {label}", body
    for label, change in STRUCTURAL:
        body = copy.deepcopy(PLACEMENT_REQUEST)
        change(body)
        yield label, body


STRUCTURAL = [
    ("no brokers", lambda b: b.update(brokers=[])),
    ("no partitions", lambda b: b.update(partitions=[])),
    ("no topics", lambda b: b.update(topics=[])),
    ("a topic twice", lambda b: b["topics"].append({"name": "orders", "retention_ms": 1})),
    ("duplicate broker", lambda b: b["brokers"].append(dict(b["brokers"][0]))),
    ("one broker without a rack", lambda b: b["brokers"][0].pop("rack")),
    ("no racks", lambda b: [broker.pop("rack") for broker in b["brokers"]]),
    ("every broker in one rack", lambda b: [broker.update(rack="a") for broker in b["brokers"]]),
    ("a replica on an unknown broker", lambda b: b["partitions"][0].update(replicas=[9, 2])),
    ("replicas all on unknown brokers", lambda b: [p.update(replicas=[7, 8]) for p in b["partitions"]]),
    ("a replica twice", lambda b: b["partitions"][0].update(replicas=[1, 1])),
    ("no replicas", lambda b: b["partitions"][0].update(replicas=[])),
    ("more replicas than brokers", lambda b: b["partitions"][0].update(replicas=[1, 2, 3, 4])),
    ("duplicate partition", lambda b: b["partitions"].append(dict(b["partitions"][0]))),
    ("unknown field", lambda b: b.update(extra=1)),
    ("unknown topic", lambda b: b["partitions"][0].update(topic="nowhere")),
    ("heuristic", lambda b: b.update(solver="heuristic")),
    ("unknown solver", lambda b: b.update(solver="simplex")),
    ("balance", lambda b: b["options"].update(objective="balance")),
    ("brokers objective", lambda b: b["options"].update(objective="brokers")),
    ("budget 0", lambda b: b["options"].update(max_bytes_moved=0)),
    ("zero sizes", lambda b: [p.update(size=0) for p in b["partitions"]]),
    ("retention forever, no throughput", lambda b: b["topics"][0].update(retention_ms=-1)),
    ("retention 0", lambda b: b["topics"][0].update(retention_ms=0)),
    ("retention 1 ms", lambda b: b["topics"][0].update(retention_ms=1)),
    ("not an object", lambda b: b.clear()),
]


REGRESSIONS: list[tuple[str, bytes]] = [
    # what the campaign found (bench/fuzz.py --target placement), each once an answer 500 or a traceback
    (
        "campaign 2923395837: a broker whose headroom leaves it 0 bytes (disk 1 × 0.97), overloaded",
        b'{"solver": "heuristic", "brokers": [{"id": 0, "disk": 1, "network": 67314088775.67116}, {"id": 1, '
        b'"disk": 8518, "network": 53560258251.962296}, {"id": 2, "disk": 26240, "network": 175350789258.44095}, '
        b'{"id": 3, "disk": 27039, "network": 370160591905.1305}, {"id": 4, "disk": 5614, "network": '
        b'55901698497.706825}], "topics": [{"name": "t", "retention_ms": 17}, {"name": "u", "retention_ms": '
        b'1467620179}], "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 0, 2], "size": 5, '
        b'"throughput": 3402923.91450968}, {"topic": "t", "partition": 1, "replicas": [1, 2, 3], "size": 6, '
        b'"throughput": 66093330013.22255}, {"topic": "u", "partition": 2, "replicas": [1], "size": 121, '
        b'"throughput": 2521091133.960825}, {"topic": "u", "partition": 3, "replicas": [0, 1], "size": 47, '
        b'"throughput": null}, {"topic": "t", "partition": 4, "replicas": [4, 3, 0], "size": 4120}, {"topic": "u", '
        b'"partition": 5, "replicas": [2, 1], "size": 9}], "options": {"objective": "brokers", "time_limit_ms": 20, '
        b'"max_utilization": 0.97}}',
    ),
    (
        "a broker with 0.5 thousandths of a byte/s of network left (0.001 × 0.5), overloaded",
        b'{"brokers": [{"id": 1, "disk": 100, "network": 0.001}, {"id": 2, "disk": 100, "network": 10}], '
        b'"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "size": 1, "throughput": 1}], '
        b'"options": {"max_utilization": 0.5}}',
    ),
]


def random_body(rng: random.Random) -> Any:
    """A placement body: 0-6 brokers (racks for all, none or some), 0-9 partitions of 1-3 replicas, sizes and
    throughputs at the scale of the capacities or not, options and solver drawn. Half the bodies are wild: in
    them a number is now and then an extreme value, an id a duplicate, a piece missing."""
    wild = rng.random() < 0.5

    def odd(chance: float) -> bool:
        return wild and rng.random() < chance

    def number(low: float, high: float, whole: bool) -> Any:
        """Log-uniform in [low, high] (a whole number when `whole`), or in a wild body now and then extreme."""
        if odd(1 / 10):
            return rng.choice(EXTREMES)
        value = 10 ** rng.uniform(math.log10(low), math.log10(high))
        return round(value) if whole else value

    scale = 10 ** rng.uniform(0, 15.5)  # bytes of a broker (up to 2^53 and past it)
    rate = 10 ** rng.uniform(-2.5, 12)  # bytes/s of a broker
    racks = rng.choice(["all", "none", "some" if wild else "all"])
    count = rng.choice([0, 1, 2, 3, 3, 4, 5, 6] if wild else [2, 3, 3, 4, 5, 6])
    brokers = []
    for b in range(count):
        broker: dict[str, Any] = {
            "id": rng.choice([0, -1, 2**31, "x"]) if odd(0.05) else b,
            "disk": number(max(1, scale / 3), scale * 3, True),
            "network": number(max(1e-3, rate / 3), rate * 3, False),
        }
        if racks == "all" or (racks == "some" and rng.random() < 0.5):
            broker["rack"] = rng.choice(["a", "b", "c"])
        brokers.append(broker)
    topics = [
        {"name": name, **({"retention_ms": number(1, 10**10, True)} if rng.random() < 0.95 else {})}
        for name in ("t", "u")
        if not odd(0.1)
    ]
    partitions = []
    for j in range(rng.randint(0 if wild else 1, 9)):
        factor = rng.choice([1, 1, 2, 3])
        ids = list(range(count)) + ([99] if rng.random() < 0.1 else [])
        replicas = [0, 0] if odd(0.05) else rng.sample(ids, min(factor, len(ids))) or [99]
        partition: dict[str, Any] = {
            "topic": rng.choice(["t", "u"]),
            "partition": 0 if odd(0.03) else j,
            "replicas": replicas,
            "size": 0 if rng.random() < 0.03 else number(1, scale * rng.choice([0.05, 0.3, 1.5]), True),
        }
        if rng.random() < 0.6:
            partition["throughput"] = (
                0 if rng.random() < 0.05 else number(rate * 1e-6, rate * rng.choice([0.05, 0.3, 1.5]), False)
            )
        partitions.append(partition)
    options: dict[str, Any] = {
        "objective": "fast" if odd(0.03) else rng.choice(["moves", "balance", "brokers"]),
        "time_limit_ms": rng.choice(EXTREMES) if odd(0.05) else rng.choice([10, 20, 50, 100]),
    }
    if rng.random() < 0.3:
        options["max_bytes_moved"] = number(1, scale * 3, True)
    if rng.random() < 0.3:
        options["max_utilization"] = rng.choice(EXTREMES) if odd(0.1) else rng.choice([0.5, 0.8, 0.97, 1.0])
    body: dict[str, Any] = {
        "solver": "simplex" if odd(0.02) else rng.choice(["heuristic", "exact"]),
        "brokers": brokers,
        "topics": topics,
        "partitions": partitions,
        "options": options,
    }
    if odd(0.02):
        body["unexpected"] = True
    return body


def mutate(rng: random.Random, body: Any, times: int = 2) -> Any:
    """`body` with `times` of its leaves (numbers, strings, lists) replaced by extreme values, for the campaign."""
    body = copy.deepcopy(body)
    for _ in range(times):
        leaves = list(_leaves(body))
        if not leaves:
            break
        container, key = rng.choice(leaves)
        container[key] = rng.choice(EXTREMES)
    return body


def _leaves(value: Any) -> Iterator[tuple[Any, Any]]:
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield value, key
        yield from _leaves(item)


KNOWN = {code.value for code in ErrorCode}


def problems(status: int, answer: bytes, request: Any) -> list[str]:
    """What is wrong with an API answer (empty: nothing): a 5xx, an error without a known code, or a plan that
    breaks the request's own rules (replica counts, distinct brokers, capacities, budget, the moves' sum)."""
    try:
        document = json.loads(answer)
    except ValueError:
        return [f"status {status}: the answer is not JSON: {answer[:200]!r}"]
    if status != 200:
        code = document.get("error", {}).get("code") if isinstance(document, dict) else None
        found = [] if 400 <= status < 500 else [f"status {status}"]
        return found + ([] if code in KNOWN else [f"status {status} with an unknown code {code!r}"])
    found = []
    by_key = {(p["topic"], p["partition"]): p for p in request["partitions"]}
    for placed in document["partitions"]:
        given = by_key[placed["topic"], placed["partition"]]
        if len(placed["replicas"]) != len(given["replicas"]) or len(set(placed["replicas"])) != len(placed["replicas"]):
            found.append(f"{placed['topic']}/{placed['partition']}: replicas {placed['replicas']}")
    utilization = request["options"].get("max_utilization", 1.0)
    for broker in document["brokers"]:
        for dimension in ("disk_after", "network_after"):
            if broker[dimension] > utilization * (1 + 1e-12):
                found.append(f"broker {broker['id']}: {dimension} {broker[dimension]} above {utilization}")
    if document["bytes_moved"] != sum(move["bytes"] for move in document["moves"]):
        found.append("bytes_moved is not the sum of the moves")
    budget = request["options"].get("max_bytes_moved")
    if budget is not None and document["bytes_moved"] > budget:
        found.append(f"bytes_moved {document['bytes_moved']} above max_bytes_moved {budget}")
    return found


def cli(body: bytes) -> tuple[int, bytes, bytes]:
    """`groupfit placement --input -` in this process: (exit status, stdout, stderr). An exception escaping
    `main` is what a user would see as a traceback: it propagates."""
    from app.cli import main

    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    streams = [io.TextIOWrapper(io.BytesIO(body)), io.TextIOWrapper(out, write_through=True)]
    streams.append(io.TextIOWrapper(err, write_through=True))
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        status = main(["placement", "--input", "-"])
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        for stream in streams:
            stream.detach()  # leaves the buffers open
    return status, out.getvalue(), err.getvalue()


def cli_problems(status: int, out: bytes, err: bytes, request: Any, api_status: int, api_answer: bytes) -> list[str]:
    """What is wrong with the CLI's answer to a body the API answered: exit 0 with a plan as sound as the API's,
    or exit 2 with the API's error code. Not compared byte for byte, and one answer may differ: on a loaded
    machine CP-SAT's wall-clock guard (twice the deterministic budget) can stop the exact solver's search
    before its first placement in one of the two runs, which then says so (`placement_infeasible`, "within its
    time limit") where the other plans."""
    cli_code = _code(err) if status == 2 else None
    api_code = _code(api_answer) if api_status != 200 else None
    if _timed_out(err if status == 2 else b"") or _timed_out(api_answer if api_status != 200 else b""):
        return [] if status in (0, 2) else [f"CLI exit {status}: {err[:300]!r}"]
    if api_status == 200:
        if status != 0:
            return [f"CLI exit {status} where the API answered 200: {err[:300]!r}"]
        return [f"CLI: {problem}" for problem in problems(200, out, request)]
    if status != 2:
        return [f"CLI exit {status} where the API answered {api_status}: {err[:300]!r}"]
    if cli_code is None:
        return [f"CLI error is not the error body: {err[:300]!r}"]
    return [] if cli_code == api_code else [f"CLI code {cli_code}, API code {api_code}"]


def _code(answer: bytes) -> str | None:
    try:
        return json.loads(answer)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def _timed_out(answer: bytes) -> bool:
    return b"placement_infeasible" in answer and b"within its time limit" in answer
