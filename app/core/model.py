"""The problem of one rebalance (paper §III): partitions with rates, a capacity, the previous assignment.

Partitions are addressed by their index in the request (0..n-1) inside the algorithms, so every
per-partition quantity is a plain list and a placement costs no hashing of (topic, partition).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, cast

from app.core import extension
from app.core.errors import AssignmentError, ErrorCode

PartitionKey = tuple[str, int]
"""(topic, partition)"""

MAX_CONSUMERS = 100_000
"""The most consumers one answer may have unless the caller sets another limit (the service's
GROUPFIT_MAX_CONSUMERS): a count implied by the request is checked against it before anything is allocated."""

ROUNDING_ERROR = 1e-12
"""The relative error a sum of rates may carry from float rounding: summing n floats errs by at most about
n·2⁻⁵³ ≈ n·1.1e-16 of the sum, so 1e-12 covers the sums of up to ~9 000 rates on one consumer, and it is still a
millionth of a millionth of a capacity, far below any difference in rate that matters. The compiled core
uses the same (native/src/bins.rs); replica placement has its own (app/core/placement/model.py)."""

ROUNDING = 1 + ROUNDING_ERROR
"""A load counts as within a capacity up to this factor (`within`)."""


def within(load: float, capacity: float) -> bool:
    """Whether `load` fits in `capacity`, up to float rounding of the summed rates."""
    return load <= capacity * ROUNDING


def consumer_sort_key(consumer: str) -> tuple:
    """Natural order of consumer ids ("c2" before "c10"): the order bins are scanned and ties broken in. Ids
    whose numbers are equal ("c01", "c1") are ordered by the id itself, so no two ids tie and no order depends
    on the order they came in (or on a set's). No cache: callers compute it once per id and request (a bin
    keeps its key), so nothing grows with the ids a service has seen, and nothing stops working past a
    cache's size."""
    chunks = tuple(int(chunk) if i % 2 else chunk for i, chunk in enumerate(re.split(r"(\d+)", consumer)))
    return chunks, consumer


def sorted_consumers(consumers: Iterable[str]) -> list[str]:
    return sorted(consumers, key=consumer_sort_key)


def consumers_implied(implied: float, limit: int, what: str) -> int:
    """⌈implied⌉ (a count of consumers such as Σ rate / C), refused with `too_many_consumers` above `limit`
    (and when it is not finite) before any algorithm allocates that many."""
    if not implied <= limit:  # also NaN and +inf
        raise AssignmentError(
            ErrorCode.TOO_MANY_CONSUMERS,
            f"{what} is {implied:.6g} consumers, more than this service gives one answer ({limit}); "
            "check the capacity and rates (same unit?) or the algorithm's parameters.",
            {"implied_consumers": implied if implied < math.inf else None, "max_consumers": limit},
        )
    return consumer_count(implied)


def consumer_count(implied: float) -> int:
    """⌈implied⌉ up to float rounding; 0 at or below 0 (negative sums, -inf too, are refused elsewhere)."""
    return math.ceil(implied - 1e-9) if implied > 0 else 0


def capacity_from_throughput(consumer_throughput: float, iteration_s: float = 30.0, rebalance_s: float = 5.0) -> float:
    """C = C̄·(T − t_r)/T (§VI-C): the rate a consumer may be given so it catches up within one iteration."""
    for name, value in (("consumer_throughput", consumer_throughput), ("iteration_s", iteration_s)):
        if not _positive(value):
            raise AssignmentError(ErrorCode.INVALID_CAPACITY, f"{name} must be a finite number above 0, got {value!r}.")
    if not (_finite(rebalance_s) and 0 <= rebalance_s < iteration_s):
        raise AssignmentError(
            ErrorCode.INVALID_CAPACITY,
            f"rebalance_s must be at least 0 and below iteration_s ({iteration_s}), got {rebalance_s!r}.",
        )
    return consumer_throughput * (iteration_s - rebalance_s) / iteration_s


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _finite(value) and value > 0


@dataclass(frozen=True, eq=False)
class Problem:
    """Everything an algorithm may read. Build it with `build_problem`, which validates."""

    keys: list[PartitionKey]
    rates: list[float]
    lags: list[float | None]
    capacity: float
    previous: dict[str, list[PartitionKey]] = field(default_factory=dict)
    members: list[str] | None = None
    member_capacities: dict[str, float] = field(default_factory=dict)
    """A member's own capacity where it differs from C; any other consumer has C."""
    max_consumers: int = MAX_CONSUMERS
    """The most consumers an answer may have (`consumers_implied`)."""

    def consumers_implied(self, implied: float, what: str) -> int:
        return consumers_implied(implied, self.max_consumers, what)

    def capacity_of(self, consumer: str) -> float:
        """The most rate `consumer` may be given: its own capacity, else the request's C."""
        return self.member_capacities.get(consumer, self.capacity)

    @property
    def uniform(self) -> bool:
        """Whether every consumer has the request's capacity C."""
        return not self.member_capacities

    @property
    def size(self) -> int:
        return len(self.keys)

    @cached_property
    def index(self) -> dict[PartitionKey, int]:
        return {key: j for j, key in enumerate(self.keys)}

    @cached_property
    def previous_owner(self) -> list[str | None]:
        """g(j,k) of Eq. 13: the consumer that held partition j at t_{k-1}, None for a new partition."""
        owner: list[str | None] = [None] * len(self.keys)
        index = self.index
        for consumer, keys in self.previous.items():
            for key in keys:
                j = index.get(key)
                if j is not None:
                    owner[j] = consumer
        return owner

    @cached_property
    def previous_indices(self) -> dict[str, list[int]]:
        """The previous assignment restricted to partitions that still exist (gone ones dropped)."""
        index = self.index
        return {
            consumer: [j for j in map(index.get, keys) if j is not None] for consumer, keys in self.previous.items()
        }

    @cached_property
    def key_order(self) -> list[int]:
        """Partition indices by (topic, partition)."""
        return sorted(range(len(self.keys)), key=self.keys.__getitem__)

    @cached_property
    def decreasing_order(self) -> list[int]:
        """Partition indices by rate, largest first, ties by (topic, partition)."""
        return sorted(self.key_order, key=self.rates.__getitem__, reverse=True)

    @cached_property
    def decreasing_rank(self) -> list[int]:
        rank = [0] * len(self.keys)
        for position, j in enumerate(self.decreasing_order):
            rank[j] = position
        return rank

    def decreasing(self, indices: Iterable[int] | None = None) -> list[int]:
        """Indices by rate, largest first, ties by (topic, partition)."""
        if indices is None:
            return list(self.decreasing_order)
        return sorted(indices, key=self.decreasing_rank.__getitem__)

    @cached_property
    def total_rate(self) -> float:
        return math.fsum(self.rates)

    @cached_property
    def lower_bound(self) -> int:
        """⌈Σ s_j / C⌉: no assignment uses fewer consumers."""
        return self.consumers_implied(self.total_rate / self.capacity, "Σ rate / capacity")


def check_sums(rates: list[float], lags: list[float | None]) -> None:
    """The sums of rates and of lags are finite (each value may be, and two of 1e308 still overflow), added
    one by one as the algorithms add loads and exactly as math.fsum adds them (which raises where the exact
    sum rounds past the largest float)."""
    for name, values in (("rate", rates), ("lag", lags)):
        present = [value for value in values if value is not None]
        try:
            finite = math.isfinite(sum(present)) and math.isfinite(math.fsum(present))
        except OverflowError:
            finite = False
        if not finite:
            raise AssignmentError(
                ErrorCode.INVALID_RATE, f"the {name}s sum to more than the largest float; send them in a larger unit."
            )


def validate_partitions(keys: list[PartitionKey], rates: list[float], lags: list[float | None]) -> None:
    """Rates and lags finite and at least 0, and so are their sums; each (topic, partition) once."""
    for name, values in (("rate", rates), ("lag", lags)):
        bad = [j for j, value in enumerate(values) if value is not None and not 0 <= value < math.inf]
        if bad:
            j = bad[0]
            raise AssignmentError(
                ErrorCode.INVALID_RATE,
                f"partition {keys[j][0]}/{keys[j][1]} has {name} {values[j]!r}; {name}s must be finite and at least 0.",
                {"partitions": [keys[i] for i in bad[:20]]},
            )
    check_sums(rates, lags)
    if len(set(keys)) != len(keys):
        counts = Counter(keys)
        duplicate = next(key for key in keys if counts[key] > 1)
        raise AssignmentError(
            ErrorCode.DUPLICATE_PARTITION,
            f"partition {duplicate[0]}/{duplicate[1]} is listed more than once; list each partition once.",
            {"partition": duplicate},
        )


def build_problem(
    keys: Sequence[PartitionKey],
    rates: Sequence[float],
    lags: Sequence[float | None] | None,
    capacity: float,
    previous: Mapping[str, Sequence[PartitionKey]] | None = None,
    members: Sequence[str] | None = None,
    member_capacities: Mapping[str, float] | None = None,
    max_consumers: int = MAX_CONSUMERS,
) -> Problem:
    """Validate the semantic rules of a request (types are the caller's parser's job). The consumers it
    implies (⌈Σ rate / C⌉, and the members) are checked against `max_consumers` before anything is built."""
    check_capacity(capacity)
    keys = list(keys)
    rates = list(rates)
    lags = [None] * len(keys) if lags is None else list(lags)
    previous = dict(previous or {})
    if extension.valid(keys, rates, lags, previous):  # the compiled check found nothing wrong (lists of keys among it)
        check_sums(rates, lags)
        previous_doc = cast(dict[str, list[PartitionKey]], previous)
    else:
        rates = [float(rate) for rate in rates]
        validate_partitions(keys, rates, lags)
        previous_doc = _checked_previous(previous)
    check_scale(math.fsum(rates), capacity, None if members is None else len(members), max_consumers)
    member_list, own = _members(members, member_capacities, capacity)
    return Problem(keys, rates, lags, float(capacity), previous_doc, member_list, own, max_consumers)


def check_capacity(capacity: float) -> None:
    if not _positive(capacity):
        raise AssignmentError(
            ErrorCode.INVALID_CAPACITY, f"capacity must be a finite number above 0, got {capacity!r}."
        )


def check_scale(total_rate: float, capacity: float, member_count: int | None, max_consumers: int) -> int:
    """The consumers a request implies (⌈Σ rate / C⌉, and its members) within `max_consumers`; ⌈Σ rate / C⌉,
    the lower bound."""
    lower_bound = consumers_implied(total_rate / capacity, max_consumers, "Σ rate / capacity")
    if member_count is not None and member_count > max_consumers:
        consumers_implied(member_count, max_consumers, "the member count")
    return lower_bound


def _checked_previous(previous: Mapping[str, Sequence[PartitionKey]]) -> dict[str, list[PartitionKey]]:
    """Non-empty consumer ids, and no partition held by two of them."""
    previous_doc: dict[str, list[PartitionKey]] = {}
    owner_of: dict[PartitionKey, str] = {}
    for consumer, held in previous.items():
        if not consumer:
            raise AssignmentError(
                ErrorCode.INVALID_PREVIOUS, "consumer ids in the previous assignment must not be empty."
            )
        held = list(held)
        for key in held:
            if key in owner_of:
                raise AssignmentError(
                    ErrorCode.INVALID_PREVIOUS,
                    f"partition {key[0]}/{key[1]} appears twice in the previous assignment "
                    f"({owner_of[key]!r} and {consumer!r}); a partition has one consumer.",
                    {"partition": key, "consumers": sorted_consumers({owner_of[key], consumer})},
                )
            owner_of[key] = consumer
        previous_doc[consumer] = held
    return previous_doc


def _members(
    members: Sequence[str] | None, member_capacities: Mapping[str, float] | None, capacity: float
) -> tuple[list[str] | None, dict[str, float]]:
    member_list: list[str] | None = None
    if members is not None:
        member_list = list(members)
        if not member_list:
            raise AssignmentError(
                ErrorCode.INVALID_MEMBERS,
                "members is empty; omit it to let groupfit size the group, or list the members.",
            )
        if any(not isinstance(m, str) or not m for m in member_list) or len(set(member_list)) != len(member_list):
            raise AssignmentError(ErrorCode.INVALID_MEMBERS, "members must be distinct, non-empty consumer ids.")
    return member_list, _member_capacities(member_capacities or {}, member_list, float(capacity))


def _member_capacities(given: Mapping[str, float], members: list[str] | None, capacity: float) -> dict[str, float]:
    """Each given capacity positive and finite and of a member; those equal to C are dropped, so a group
    of equal consumers is `uniform` however it was written."""
    strangers = sorted_consumers(set(given) - set(members or ()))
    if strangers:
        raise AssignmentError(
            ErrorCode.INVALID_MEMBERS,
            f"a capacity is given for {strangers[0]!r}, which is not a member; give capacities only with members.",
            {"consumers": strangers[:20]},
        )
    bad = [m for m, value in given.items() if not _positive(value)]
    if bad:
        raise AssignmentError(
            ErrorCode.INVALID_CAPACITY,
            f"member {bad[0]!r} has capacity {given[bad[0]]!r}; a capacity must be a finite number above 0.",
            {"consumers": sorted_consumers(bad)[:20]},
        )
    return {m: float(value) for m, value in given.items() if float(value) != capacity}
