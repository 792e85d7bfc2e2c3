"""How a result type reads its JSON document, worked out once per type from its annotations, so each result
type is declared once (its fields, named as in openapi/openapi.json) and nothing restates them:

- a field reads the document's property of the same name; a trailing underscore is dropped where the name is a
  Python keyword (`from_` reads "from");
- `X | None` may be absent or null (read as None); any other field must be there;
- `dt.datetime` reads RFC 3339 text; `list[X]` and `dict[str, X]` read each item as X; a dataclass reads an
  object, a NamedTuple an object by its field names (absent ones take the tuple's defaults) or an array in field
  order; anything else is the JSON value as it is;
- a field whose type is `TopicPartition` has no property of its own: it is the document's `topic` and `partition`;
- a field named `raw` is the document itself.

tests/clients/test_contract.py walks the same description (`wire_fields`) against openapi/openapi.json.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import keyword
import operator
import types
import typing
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

R = TypeVar("R")
Convert = Callable[[Any], Any]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition}


class WireField(NamedTuple):
    attribute: str  # the result type's field
    key: str | None  # its JSON property; None for a TopicPartition made of the document's topic and partition
    hint: Any  # its type, resolved
    optional: bool  # `X | None`: absent or null reads as None


def json_name(attribute: str) -> str:
    stripped = attribute.removesuffix("_")
    return stripped if stripped != attribute and keyword.iskeyword(stripped) else attribute


def non_null(hint: Any) -> tuple[Any, bool]:
    """`hint` without None, and whether it allowed None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kept = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(kept) == 1:  # the results' only unions are `X | None`
            return kept[0], True
    return hint, False


def is_named_tuple(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, tuple) and hasattr(hint, "_fields")


@functools.cache
def wire_fields(cls: type) -> tuple[WireField, ...]:
    """The JSON fields a dataclass or NamedTuple result type reads, `raw` left out."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields)  # type: ignore[attr-defined]  # a NamedTuple
    described = []
    for name in names:
        if name == "raw":
            continue
        hint, optional = non_null(hints[name])
        key = None if hint is TopicPartition and not is_named_tuple(cls) else json_name(name)
        described.append(WireField(name, key, hint, optional))
    return tuple(described)


def converter(hint: Any) -> Convert | None:
    """How to read a JSON value as `hint` (a field's None is handled by its reader); None: as it is."""
    hint, _ = non_null(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    convert: Convert | None = None
    if hint is dt.datetime:
        convert = dt.datetime.fromisoformat
    elif origin is list and (item := converter(args[0])) is not None:
        convert = functools.partial(_each, item)
    elif origin is dict and (value := converter(args[1])) is not None:
        convert = functools.partial(_each_value, value)
    elif dataclasses.is_dataclass(hint) or is_named_tuple(hint):
        convert = reader(hint)
    return convert


def _each(item: Convert, values: list[Any]) -> list[Any]:
    return [item(v) for v in values]


def _each_value(value: Convert, values: dict[str, Any]) -> dict[str, Any]:
    return {k: value(v) for k, v in values.items()}


@functools.cache
def reader(cls: type[R]) -> Callable[[Any], R]:
    """Reads a JSON value as `cls`, a dataclass or NamedTuple (built once per type: an answer of 10^3
    partitions reads 10^3 results)."""
    steps = [(f.attribute, f.key, converter(f.hint), f.optional) for f in wire_fields(cls)]  # type: ignore[arg-type]
    has_raw = dataclasses.is_dataclass(cls) and "raw" in {f.name for f in dataclasses.fields(cls)}
    if not has_raw and len(steps) > 1 and all(key and convert is None and not opt for _, key, convert, opt in steps):
        values_of = operator.itemgetter(*(key for _, key, _, _ in steps))  # plain fields, in order: the fast way

        def read_plain(doc: Any) -> R:
            return cls(*(doc if isinstance(doc, list) else values_of(doc)))

        return read_plain

    def read(doc: Any) -> R:
        if isinstance(doc, list):  # a NamedTuple sent as an array
            return cls(*doc)
        values: dict[str, Any] = {}
        for attribute, key, convert, optional in steps:
            if key is None:
                values[attribute] = TopicPartition(doc["topic"], doc["partition"])
                continue
            if optional and key not in doc:
                if is_named_tuple(cls):
                    continue  # the tuple's default
                value = None
            else:
                value = doc[key]
            values[attribute] = value if convert is None or value is None else convert(value)
        if has_raw:
            values["raw"] = doc
        return cls(**values)

    return read


def read(hint: Any, doc: Any) -> Any:
    """`doc` read as `hint` (a result type, or a list or dict of them)."""
    convert = converter(hint)
    return doc if convert is None else convert(doc)


class Readable:
    """A result type read from its JSON document (`from_json`)."""

    @classmethod
    def from_json(cls: type[R], doc: dict[str, Any]) -> R:
        return reader(cls)(doc)  # type: ignore[arg-type]  # a class is hashable
