"""Zones: where a consumer runs (its rack) and where each partition can be read without crossing zones (its
racks: the leader's rack, or every replica's where the brokers serve fetch-from-follower, KIP-392).

A partition is *local* on a consumer when the consumer's rack is known and is one of the partition's racks;
every other placement reads across zones: a partition without racks, and anything on a consumer without a
rack, count as cross-zone wherever they go (groupfit cannot show them local). Racks are opaque strings
compared exactly, as Kafka compares broker.rack and client.rack.

Inside the algorithms a rack is its index in the sorted list of the request's racks, so a partition's racks
are a short tuple of small integers and a bin's rack one integer (−1: none known). This module imports
nothing of app.core: the model builds its `Zones`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

NO_RACK = -1
"""A consumer whose rack is not known (or not chosen yet)."""


class Zones:
    """The racks of a zone-aware request: each partition's (as indices) and the known consumers'."""

    __slots__ = ("_index", "names", "of_consumer", "of_partition")

    def __init__(self, partition_racks: Sequence[Sequence[str]], consumer_racks: Mapping[str, str]) -> None:
        distinct = {rack for racks in partition_racks for rack in racks} | set(consumer_racks.values())
        self.names: list[str] = sorted(distinct)
        index = self._index = {rack: r for r, rack in enumerate(self.names)}
        self.of_partition: list[tuple[int, ...]] = [
            tuple(sorted({index[rack] for rack in racks})) for racks in partition_racks
        ]
        """Each partition's racks, as sorted indices; () where it has none."""
        self.of_consumer: dict[str, int] = {c: index[rack] for c, rack in consumer_racks.items()}
        """The racks known before the algorithm runs: the members', or the previous consumers'."""

    def rack(self, name: str) -> int:
        return self._index[name]

    def rack_of(self, consumer: str) -> int:
        return self.of_consumer.get(consumer, NO_RACK)

    def local(self, j: int, rack: int) -> bool:
        """Whether partition j is read within its zone by a consumer in `rack`."""
        return rack >= 0 and rack in self.of_partition[j]

    def cross_zone(self, rates: Sequence[float], held: Iterable[int], rack: int) -> float:
        """The rate a consumer in `rack` holding `held` reads across zones."""
        of_partition = self.of_partition
        return math.fsum(rates[j] for j in held if rack < 0 or rack not in of_partition[j])

    def best_rack(self, rates: Sequence[float], held: Iterable[int]) -> int:
        """The rack where the most of `held`'s rate is local (ties: the first by name); NO_RACK where none of
        it is local anywhere. For a consumer no algorithm gave a rack: an autoscaler starts it there."""
        local_rate: dict[int, float] = {}
        for j in held:
            for r in self.of_partition[j]:
                local_rate[r] = local_rate.get(r, 0.0) + rates[j]
        if not local_rate:
            return NO_RACK
        return min(local_rate, key=lambda r: (-local_rate[r], r))
