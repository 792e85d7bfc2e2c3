"""The Python client against openapi/openapi.json, field by field, with no service running.

Every call's method, path, query and headers are the operation's; every answer the client reads as a typed
result is walked from the operation's response schema down through every nested $ref: each result type has
exactly the schema's properties (a TopicPartition field standing for `topic` and `partition`), each field a
compatible type (string, integer, number, boolean, array, object, a $ref to the schema the nested type is
checked against), and a field is `X | None` exactly where the schema lets it be absent or null. What the client
sends (PartitionRate, TopicPartition, the bodies it builds) is checked the same way. The walk follows the
reader's own description of each type (`groupfit_client._wire.wire_fields`), so it checks what the client does.

A drift between the two (a field the service adds, one it renames, a type or a required flag it changes, a
nested schema it swaps) fails `test_the_client_matches_the_contract`; the drift tests below make each such
change to a copy of the contract and show that the check names it. docs/clients-contract.md tells the story.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import groupfit_client
import httpx
import pytest
from groupfit_client import PartitionRate, TopicPartition, _core
from groupfit_client._core import Answer, Call
from groupfit_client._wire import is_named_tuple, non_null, wire_fields

from tests.clients.test_http_client import CALLS

ROOT = Path(__file__).resolve().parents[2]
SPEC = json.loads((ROOT / "openapi" / "openapi.json").read_text())
SCALARS = {str: "string", dt.datetime: "string", int: "integer", float: "number", bool: "boolean"}
# Answers whose document wraps the result: the property the client returns, and the others it leaves out.
ENVELOPES = {
    "AlgorithmList": ("algorithms", set()),
    "GroupHistory": ("versions", {"group"}),  # the group the caller named
    "RatesHistory": ("windows", {"group"}),
}
UNTYPED = {"delete_group": "no body", "healthy": "the status code only"}


def operation(spec: dict, call: Call[Any]) -> dict:
    """The OpenAPI operation `call` requests (its path matched against the templates)."""
    for template, operations in spec["paths"].items():
        pattern = "^" + re.sub(r"\\{[a-z_]+\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, call.path) and call.method.lower() in operations:
            return operations[call.method.lower()]
    raise AssertionError(f"{call.method} {call.path} is not in openapi/openapi.json")


def sample_calls() -> dict[str, Call[Any]]:
    """Every client call, with every optional part given (so each query parameter and header is sent)."""
    calls = {}
    for name, (arguments, _) in CALLS.items():
        args, kwargs = arguments("g#1")
        if name == "assign":
            kwargs["idempotency_key"] = "k"
        if name == "evaluate":
            kwargs["optimum"] = {"time_limit_ms": 100}
        calls[name] = getattr(_core, name)(*args, **kwargs)
    return calls


def split_null(node: dict) -> tuple[dict, bool]:
    """A property's schema without its null alternative, and whether it had one."""
    alternatives = node.get("anyOf", [])
    kept = [a for a in alternatives if a.get("type") != "null"]
    if len(kept) == 1 and len(kept) < len(alternatives):
        return kept[0], True
    return node, False


class Contract:
    """Walks client types against the schemas of a contract; `problems` says every difference."""

    def __init__(self, spec: dict) -> None:
        self.schemas = spec["components"]["schemas"]
        self.problems: list[str] = []
        self.checked: set[tuple[type, str]] = set()  # (client type, schema) pairs walked
        self.fields = 0
        self.sent: set[str] = set()
        """Schemas of what the client sends and never reads: a field it always sends may be one the schema lets
        be absent."""

    def resolve(self, node: dict) -> tuple[str, dict]:
        """The schema a node names with $ref (and its name), or the node itself ("inline")."""
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[1]
            return name, self.schemas[name]
        return "inline", node

    def value(self, hint: Any, node: dict, where: str) -> None:
        """A JSON value of schema `node` read (or sent) as `hint`, null aside."""
        hint, _ = non_null(hint)
        name, node = self.resolve(node)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if dataclasses.is_dataclass(hint) or is_named_tuple(hint):
            if node.get("type") == "array":
                self.row(hint, node, where)
            else:
                self.object(hint, name, node, where)  # type: ignore[arg-type]
        elif hint in SCALARS:
            if node.get("type") != SCALARS[hint]:
                self.problems.append(f"{where} is {SCALARS[hint]} ({hint.__name__}), the contract says {_kind(node)}")
        elif origin is list:
            if node.get("type") != "array":
                self.problems.append(f"{where} is an array, the contract says {_kind(node)}")
            else:
                self.value(args[0], node["items"], f"{where}[]")
        elif origin is dict:
            if node.get("type") != "object" or "properties" in node:
                self.problems.append(f"{where} is a map, the contract says {_kind(node)}")
            elif args[1] is not Any:
                values = node.get("additionalProperties")
                if not isinstance(values, dict):
                    self.problems.append(f"{where} is a map of {args[1]}, the contract does not type its values")
                else:
                    self.value(args[1], values, f"{where}{{}}")
        elif hint is not Any:
            self.problems.append(f"{where}: the check does not know the type {hint!r}")

    def object(self, cls: type, name: str, node: dict, where: str) -> None:
        if (cls, name) in self.checked:
            return
        self.checked.add((cls, name))
        if node.get("type") != "object" or "properties" not in node:
            self.problems.append(f"{where} is {cls.__name__}, an object, the contract says {_kind(node)}")
            return
        properties, required = node["properties"], set(node.get("required", []))
        mine: dict[str, tuple[Any, bool, str]] = {}  # JSON property → (type, optional, the client's name for it)
        for field in wire_fields(cls):
            label = f"{cls.__name__}.{field.attribute}"
            if field.key is None:  # a TopicPartition: the document's own topic and partition
                mine |= {f.key: (f.hint, field.optional, f"{label}.{f.attribute}") for f in wire_fields(TopicPartition)}
            else:
                mine[field.key] = (field.hint, field.optional, label)
        for key in sorted(properties.keys() - mine.keys()):
            self.problems.append(f"{name}.{key} is in the contract, not in {cls.__name__} (at {where})")
        for key in sorted(mine.keys() - properties.keys()):
            self.problems.append(f"{mine[key][2]} reads {key!r}, which {name} does not have (at {where})")
        for key in sorted(mine.keys() & properties.keys()):
            hint, optional, label = mine[key]
            inner, nullable = split_null(properties[key])
            may_be_missing = key not in required or nullable
            if optional and not may_be_missing:
                self.problems.append(f"{label} is optional, but {name}.{key} is required and never null")
            elif may_be_missing and not optional and name not in self.sent:
                self.problems.append(f"{label} is required, but {name}.{key} may be absent or null")
            self.value(hint, inner, label)
            self.fields += 1

    def row(self, cls: type, node: dict, where: str) -> None:
        """A NamedTuple sent as an array in field order: as many items as fields, each of its field's type."""
        fields = wire_fields(cls)
        if not (node.get("minItems") == node.get("maxItems") == len(fields)):
            self.problems.append(f"{where} is {cls.__name__} of {len(fields)} items, the contract says {_kind(node)}")
        for field in fields:
            self.value(field.hint, node.get("items", {}), f"{where}.{field.attribute}")

    def answer(self, call_name: str, call: Call[Any], response: dict) -> None:
        """The answer `call` reads (an Answer) against the 200 response's schema."""
        read = call.read
        if not isinstance(read, Answer):
            self.problems.append(f"{call_name} reads its answer without a declared type")
            return
        name, schema = self.resolve(response)
        if read.field is None:
            self.value(read.type, response, call_name)
            return
        kept, dropped = ENVELOPES.get(name, (None, set()))
        if read.field != kept or set(schema.get("properties", {})) != {kept} | dropped:
            self.problems.append(
                f"{call_name} returns {name}.{read.field}, leaving out {sorted(set(schema['properties']) - {read.field})}"
                f"; the test expects {kept!r} leaving out {sorted(dropped)}"
            )
        if read.field in schema.get("properties", {}):
            if read.field not in schema.get("required", []):
                self.problems.append(f"{call_name} returns {name}.{read.field}, which the contract may leave out")
            self.value(read.type, schema["properties"][read.field], f"{call_name}.{read.field}")


def _kind(node: dict) -> str:
    return json.dumps({k: v for k, v in node.items() if k not in ("description", "title", "examples")})[:160]


def request_schema(spec: dict, call: Call[Any]) -> tuple[str, dict]:
    body = operation(spec, call)["requestBody"]["content"]["application/json"]["schema"]
    return Contract(spec).resolve(body)


def check(spec: dict) -> Contract:
    """The whole client against `spec`: every call, every answer it types and what it sends."""
    contract = Contract(spec)
    for name, call in sample_calls().items():
        op = operation(spec, call)
        declared = {(p["in"], p["name"].lower()) for p in op.get("parameters", [])}
        for sent in [("query", q) for q in call.params] + [("header", h.lower()) for h in call.headers]:
            if sent not in declared:
                contract.problems.append(f"{name} sends {sent[0]} {sent[1]!r}, not a parameter of the operation")
        content = op["responses"].get("200", {}).get("content", {}).get("application/json")
        if name in UNTYPED:
            continue
        if content is None:
            contract.problems.append(f"{name}: the operation answers no JSON document")
        else:
            contract.answer(name, call, content["schema"])
    schemas = contract.schemas
    # What the client sends: partitions and previous assignments in POST /v1/assign, rates in PUT …/rates.
    contract.value(PartitionRate, {"$ref": "#/components/schemas/PartitionRate"}, "PartitionRate (sent)")
    contract.value(TopicPartition, {"$ref": "#/components/schemas/PartitionRef"}, "TopicPartition (sent)")
    assign = schemas["AssignRequest"]["properties"]
    contract.sent.add("RequestPartition")  # the client sends every rate it is given (a TopicPartition: the stored)
    contract.value(list[PartitionRate], split_null(assign["partitions"])[0], "assign partitions")
    contract.value(dict[str, list[TopicPartition]], split_null(assign["previous"])[0], "assign previous")
    calls = sample_calls()
    for name in ("put_rates", "evaluate"):  # bodies the client builds from its arguments: every property
        schema_name, schema = request_schema(spec, calls[name])
        sent = set(calls[name].json or {})
        if sent != set(schema["properties"]):
            contract.problems.append(f"{name} sends {sorted(sent)}, {schema_name} has {sorted(schema['properties'])}")
    for name in ("assign", "place_replicas"):  # the caller's documents, sent as they are
        schema_name, schema = request_schema(spec, calls[name])
        if not set(calls[name].json or {}) <= set(schema["properties"]):
            contract.problems.append(f"{name} sends fields {schema_name} does not have")
    return contract


def test_the_client_matches_the_contract():
    contract = check(SPEC)
    assert not contract.problems, "\n".join(contract.problems)
    assert contract.fields > 150, f"only {contract.fields} fields were compared"
    # Every typed result the package exports was walked: none escapes the check.
    exported = {getattr(groupfit_client, name) for name in groupfit_client.__all__ if name[0].isupper()}
    typed = {t for t in exported if dataclasses.is_dataclass(t) or is_named_tuple(t)}
    walked = {cls for cls, _ in contract.checked}
    assert typed - walked == {groupfit_client.DeltaCell}, typed - walked  # DeltaCell is an array: checked as a row


def test_query_defaults_are_the_services():
    """A call given no optional arguments sends the defaults openapi/openapi.json declares."""
    calls = [_core.history("g"), _core.groups(), _core.rates_history("g"), _core.replay("g")]
    for call in calls:
        declared = {p["name"]: p["schema"].get("default") for p in operation(SPEC, call).get("parameters", [])}
        assert dict(call.params) == {
            name: str(value).lower() if isinstance(value, bool) else value
            for name, value in declared.items()
            if value is not None
        }, call.path


# -- drift: each change to a copy of the contract is named --------------------------------------------------


def setting(*path: str | int, value: Any) -> Callable[[dict], None]:
    """A change that sets the node at `path` (below components/schemas) to `value`."""

    def change(spec: dict) -> None:
        node = spec["components"]["schemas"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _add_required(spec: dict) -> None:
    setting("ConsumerLoad", "properties", "lag", value={"type": "number"})(spec)
    spec["components"]["schemas"]["ConsumerLoad"]["required"].append("lag")


def _rename_property(spec: dict) -> None:
    move = spec["components"]["schemas"]["Move"]
    move["properties"]["source"] = move["properties"].pop("from")
    move["required"] = ["source" if r == "from" else r for r in move["required"]]


def _require_optional(spec: dict) -> None:
    setting("AssignResponse", "properties", "version", value={"type": "integer"})(spec)
    spec["components"]["schemas"]["AssignResponse"]["required"].append("version")


def _unrequire(spec: dict) -> None:
    spec["components"]["schemas"]["GroupState"]["required"].remove("capacity")


def _drop_query_parameter(spec: dict) -> None:
    history = spec["paths"]["/v1/groups/{group}/history"]["get"]
    history["parameters"] = [p for p in history["parameters"] if p["name"] != "limit"]


INTEGER, STRING = {"type": "integer"}, {"type": "string"}
DRIFTS = {
    "a field the service adds": (_add_required, "ConsumerLoad.lag is in the contract, not in ConsumerLoad"),
    "a renamed field": (_rename_property, "Move.from_ reads 'from', which Move does not have"),
    "a changed type": (
        setting("ReplicaMove", "properties", "bytes", value=STRING),
        "ReplicaMove.bytes is integer (int), the contract says",
    ),
    "a changed nullable type": (
        setting("LatencyFigures", "properties", "p99", "anyOf", 0, value=STRING),
        "LatencyFigures.p99 is number (float), the contract says",
    ),
    "an optional field made required": (_require_optional, "Assignment.version is optional, but"),
    "a required field made optional": (_unrequire, "GroupState.capacity is required, but GroupState.capacity may"),
    "a nested schema swapped": (
        setting("AssignResponse", "properties", "moves", "items", "$ref", value="#/components/schemas/ReplicaMove"),
        "ReplicaMove.bytes is in the contract, not in Move",
    ),
    "an item type changed": (
        setting("ScaleSignal", "properties", "overloaded", "items", value=INTEGER),
        "ScaleSignal.overloaded[] is string (str), the contract says",
    ),
    "a map's value type changed": (
        setting("PlacementResponse", "properties", "bounds", "additionalProperties", value=STRING),
        "Placement.bounds{} is number (float), the contract says",
    ),
    "an envelope grown": (
        setting("GroupHistory", "properties", "next", value=STRING),
        "history returns GroupHistory.versions, leaving out ['group', 'next']",
    ),
    "a body the client builds grown": (
        setting("RatesUpdate", "properties", "source", value=STRING),
        "put_rates sends ['partitions', 'window_end'], RatesUpdate has",
    ),
    "a type the client sends changed": (
        setting("PartitionRate", "properties", "lag", "anyOf", 0, value=INTEGER),
        "PartitionRate.lag is number (float), the contract says",
    ),
    "a query parameter gone": (_drop_query_parameter, "history sends query 'limit', not a parameter of the operation"),
}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_each_drift_is_named(drift):
    change, expected = DRIFTS[drift]
    spec = copy.deepcopy(SPEC)
    change(spec)
    problems = check(spec).problems
    assert any(expected in problem for problem in problems), problems


# -- the reader, on documents made from the contract ---------------------------------------------------------


def example(contract: Contract, node: dict, full: bool) -> Any:
    """A document of schema `node`: with every property (`full`) or only the required ones, null where allowed."""
    _, node = contract.resolve(node)
    inner, nullable = split_null(node)
    if nullable and not full:
        return None
    _, inner = contract.resolve(inner)
    kind = inner.get("type")
    if kind == "object":
        if "properties" in inner:
            required = set(inner.get("required", []))
            return {k: example(contract, v, full) for k, v in inner["properties"].items() if full or k in required}
        values = inner.get("additionalProperties")
        return {"key": example(contract, values, full)} if isinstance(values, dict) else {"any": 1}
    if kind == "array":
        return [example(contract, inner.get("items", {}), full) for _ in range(inner.get("minItems", 2))]
    # any string may be read as a time: RFC 3339 text is a string too
    return {"string": "2026-11-22T10:00:00+00:00", "integer": 3, "number": 2.5, "boolean": True}.get(kind, "any")


def missing(result: Any, where: str = "result") -> list[str]:
    """The fields of a result (and of those it holds) that are None."""
    if dataclasses.is_dataclass(result):
        return [
            m
            for f in dataclasses.fields(result)
            for m in ([f"{where}.{f.name}"] if getattr(result, f.name) is None else [])
            + missing(getattr(result, f.name), f"{where}.{f.name}")
        ]
    if isinstance(result, list):
        return [m for item in result for m in missing(item, where + "[]")]
    if isinstance(result, dict):
        return [m for value in result.values() for m in missing(value, where + "{}")]
    return []


@pytest.mark.parametrize("full", [True, False], ids=["every-field", "required-only"])
def test_every_answer_reads_a_document_made_from_its_schema(full):
    """With every property given, no field of any result is left None; with only the required ones (and null
    where allowed), the client reads the document all the same."""
    contract = Contract(SPEC)
    for name, call in sample_calls().items():
        if name in UNTYPED:
            continue
        response = operation(SPEC, call)["responses"]["200"]["content"]["application/json"]["schema"]
        doc = example(contract, response, full)
        result = call.read(httpx.Response(200, json=doc))
        assert result is not None, name
        assert not full or missing(result) == [], (name, missing(result))
