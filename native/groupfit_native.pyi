"""groupfit's compiled core (native/src): the types app/core/native.py uses."""

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

class AlgorithmRow(TypedDict):
    name: str
    kind: str  # "any-fit", "modified-any-fit", "least-loaded"
    fit: str | None  # "next", "first", "best", "worst"
    decreasing: bool | None  # Any Fit: partitions largest first
    consumer_order: str | None  # Modified Any Fit: "cumulative" or "max"
    budget: bool  # honours max_rscore / max_moves
    params: tuple[str, ...]  # every parameter it reads; solve() needs each of them

ALGORITHMS: list[str]
ALGORITHM_TABLE: list[AlgorithmRow]

class Solution:
    def answer(self, algorithm: str, lower_bound: int, outputs: bytes, group: bytes) -> bytes: ...
    def stored(self) -> bytes: ...
    def summary(self, top: int) -> tuple[int, int, float, list[tuple[str, int, str, str, float]], int, float]: ...
    def outputs(self) -> dict[str, Any]: ...
    def parts(self) -> tuple[Any, ...]: ...

class Bulk:
    @property
    def size(self) -> int: ...
    @property
    def has_previous(self) -> bool: ...
    @property
    def member_count(self) -> int | None: ...
    @property
    def member_capacities(self) -> dict[str, float]: ...
    @property
    def work(self) -> int: ...
    def totals(self, rebalance_s: float, plan: bool) -> tuple[float, float, float]: ...
    def set_previous(self, previous: Mapping[str, Sequence[tuple[str, int]]]) -> bool: ...
    def solve(self, algorithm: str, capacity: float, params: Mapping[str, Any]) -> Solution: ...

def parse_assign(body: bytes) -> tuple[bytes, Bulk] | None: ...
def from_objects(
    keys: Sequence[tuple[str, int]],
    rates: Sequence[float],
    lags: Sequence[float | None] | None,
    previous: Mapping[str, Sequence[tuple[str, int]]],
    members: Sequence[str] | None,
    member_capacities: Mapping[str, float],
) -> Bulk | None: ...
def valid(
    keys: Sequence[tuple[str, int]],
    rates: Sequence[float],
    lags: Sequence[float | None],
    previous: Mapping[str, Sequence[tuple[str, int]]],
) -> bool: ...
