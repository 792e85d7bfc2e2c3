"""Open consumers (bins) of the assignment being built, and the Any Fit rules that pick one.

The rules follow the published implementation of Landau et al. (§II-B, §VI-A): an empty bin
accepts any partition; bins are scanned in consumer-id order; Best Fit takes the most loaded bin
that still fits, Worst Fit the least loaded, ties to the lowest id. Each rule keeps an index
(segment tree, sorted list, heap) so that a placement does not scan every bin.
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod

from sortedcontainers import SortedList

from app.core.model import Problem, consumer_sort_key


class ConsumerPool:
    """Which consumer a new bin is: h(j,k) of Eq. 14 with f(k) of Eq. 12.

    Without members (autoscale), ids are minted as c0, c1, …, and f(k) is the lowest one not open.
    With members, only members may be opened; f(k) is the lowest free member in id order, and once
    all are open the pool mints surplus bins that the caller later folds into the members.
    """

    MINTED_PREFIX = "c"
    SURPLUS_PREFIX = "surplus-"

    def __init__(self, members: list[str] | None) -> None:
        self.members = sorted(members, key=consumer_sort_key) if members is not None else None
        self._member_set = frozenset(members or ())
        self.opened: set[str] = set()
        self._next = 0  # f(k) only moves forward: ids are never closed within one iteration.

    def allowed(self, consumer: str) -> bool:
        return self.members is None or consumer in self._member_set

    def is_surplus(self, consumer: str) -> bool:
        return self.members is not None and consumer not in self._member_set

    def open(self, preferred: str | None = None) -> str:
        """h(j,k): the preferred (previous) consumer if allowed and not yet open, else f(k)."""
        if preferred is not None and preferred not in self.opened and self.allowed(preferred):
            consumer = preferred
        else:
            consumer = self.lowest_unused()
        self.opened.add(consumer)
        return consumer

    def lowest_unused(self) -> str:
        """f(k), Eq. 12."""
        if self.members is not None:
            while self._next < len(self.members) and self.members[self._next] in self.opened:
                self._next += 1
            if self._next < len(self.members):
                return self.members[self._next]
            prefix, start = self.SURPLUS_PREFIX, self._next - len(self.members)
        else:
            prefix, start = self.MINTED_PREFIX, self._next
        n = start
        while f"{prefix}{n}" in self.opened or f"{prefix}{n}" in self._member_set:
            n += 1
        self._next = n + (len(self.members) if self.members is not None else 0)
        return f"{prefix}{n}"

    def candidates(self, previous: list[str], count: int) -> list[str]:
        """Every id this pool can hand out while opening at most `count` bins (for index structures)."""
        pool = set(previous) | self._member_set
        prefix = self.SURPLUS_PREFIX if self.members is not None else self.MINTED_PREFIX
        pool.update(f"{prefix}{n}" for n in range(count + len(pool) + 1))
        return sorted(pool, key=consumer_sort_key)


class Bins(ABC):
    """The new assignment under construction: open consumers, their partitions and loads."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.pool = ConsumerPool(problem.members)
        self.loads: dict[str, float] = {}
        self.held: dict[str, list[int]] = {}

    # -- the fit rule ---------------------------------------------------------------------
    @abstractmethod
    def find(self, j: int) -> str | None:
        """An open bin that takes partition j under this rule, or None."""

    @abstractmethod
    def _track(self, consumer: str) -> None:
        """Record the (new or changed) load of `consumer` in the rule's index."""

    # -- shared operations ----------------------------------------------------------------
    def open(self, preferred: str | None = None) -> str:
        consumer = self.pool.open(preferred)
        self.loads[consumer] = 0.0
        self.held[consumer] = []
        self._track(consumer)
        return consumer

    def fits(self, consumer: str, j: int) -> bool:
        """An empty bin accepts anything, even a partition above capacity."""
        return not self.held[consumer] or self.problem.fits(self.loads[consumer], j)

    def put(self, consumer: str, j: int) -> None:
        self.loads[consumer] += self.problem.rates[j]
        self.held[consumer].append(j)
        self._track(consumer)

    def place_open(self, j: int) -> bool:
        """assignOpenBin (Algorithm 1, line 8): into an open bin by the rule, never a new one."""
        consumer = self.find(j)
        if consumer is None:
            return False
        self.put(consumer, j)
        return True

    def place(self, j: int) -> str:
        """assignBin: by the rule, else a new bin h(j,k) (Eq. 14)."""
        consumer = self.find(j)
        if consumer is None:
            consumer = self.open(self.problem.previous_owner[j])
        self.put(consumer, j)
        return consumer

    def assignment(self) -> dict[str, list[int]]:
        return self.held


class NextFitBins(Bins):
    """Next Fit: only the bin opened last is open."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.current: str | None = None

    def find(self, j: int) -> str | None:
        if self.current is not None and self.fits(self.current, j):
            return self.current
        return None

    def _track(self, consumer: str) -> None:
        self.current = consumer


class FirstFitBins(Bins):
    """First Fit: the first open bin in consumer-id order that fits (segment tree of residuals)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        ids = self.pool.candidates(list(problem.previous), problem.size)
        self.ids = ids
        self.rank = {consumer: r for r, consumer in enumerate(ids)}
        self.leaves = 1 << max(0, (len(ids) - 1).bit_length())
        self.tree = [-math.inf] * (2 * self.leaves)
        self.slack = problem.capacity * 1e-12

    def _residual(self, consumer: str) -> float:
        if not self.held[consumer]:
            return math.inf  # an empty bin takes anything
        return self.problem.capacity - self.loads[consumer]

    def _track(self, consumer: str) -> None:
        i = self.rank[consumer] + self.leaves
        tree = self.tree
        tree[i] = self._residual(consumer)
        i >>= 1
        while i:
            tree[i] = max(tree[2 * i], tree[2 * i + 1])
            i >>= 1

    def find(self, j: int) -> str | None:
        need = self.problem.rates[j] - self.slack
        tree = self.tree
        if tree[1] < need:
            return None
        i = 1
        while i < self.leaves:
            i = 2 * i if tree[2 * i] >= need else 2 * i + 1
        return self.ids[i - self.leaves]


class BestFitBins(Bins):
    """Best Fit: the most loaded open bin that still fits, ties to the lowest id (sorted residuals)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.by_residual = SortedList()
        self.entry: dict[str, tuple] = {}
        self.slack = problem.capacity * 1e-12

    def _track(self, consumer: str) -> None:
        old = self.entry.get(consumer)
        if old is not None:
            self.by_residual.remove(old)
        residual = self.problem.capacity - self.loads[consumer] if self.held[consumer] else math.inf
        new = (residual, consumer_sort_key(consumer), consumer)
        self.entry[consumer] = new
        self.by_residual.add(new)

    def find(self, j: int) -> str | None:
        i = self.by_residual.bisect_left((self.problem.rates[j] - self.slack,))
        if i == len(self.by_residual):
            return None
        return self.by_residual[i][2]


class WorstFitBins(Bins):
    """Worst Fit: the least loaded open bin, if it fits; ties to the lowest id (lazy max-heap)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.heap: list[tuple] = []

    def _track(self, consumer: str) -> None:
        load = self.loads[consumer] if self.held[consumer] else -math.inf
        heapq.heappush(self.heap, (load, consumer_sort_key(consumer), consumer))

    def find(self, j: int) -> str | None:
        heap, loads, held = self.heap, self.loads, self.held
        while heap:
            load, _, consumer = heap[0]
            current = loads[consumer] if held[consumer] else -math.inf
            if load == current:
                return consumer if self.fits(consumer, j) else None
            heapq.heappop(heap)  # stale: the bin has been filled since
        return None


FIT_RULES: dict[str, type[Bins]] = {
    "next": NextFitBins,
    "first": FirstFitBins,
    "best": BestFitBins,
    "worst": WorstFitBins,
}
