"""Open consumers (bins) of the assignment being built, and the Any Fit rules that pick one.

The rules follow the published implementation of Landau et al. (§II-B, §VI-A): an empty bin
accepts any partition; bins are scanned in consumer-id order; Best Fit takes the bin with the least
remaining capacity that still fits, Worst Fit the one with the most, ties to the lowest id. Each bin
has its consumer's own capacity (`Problem.capacity_of`); when all are C, least remaining is most
loaded and most remaining least loaded, the paper's rules. Each rule keeps an index
(segment tree, sorted runs, heap) so that a placement does not scan every bin.

Bins are small integers (the order they were opened in); `ids[b]` is the consumer id.
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator

from app.core.model import ROUNDING, Problem, consumer_sort_key


class ConsumerPool:
    """Which consumer a new bin is: h(j,k) of Eq. 14 with f(k) of Eq. 12.

    Without members (autoscale), ids are minted as c0, c1, …, and f(k) is the lowest one not open.
    With members, only members may be opened; f(k) is the free member of the largest capacity, the
    lowest id among equals (so the lowest id when all have C), and once all are open the pool mints
    surplus bins of capacity C that `solve` later folds into the members.
    """

    MINTED_PREFIX = "c"
    SURPLUS_PREFIX = "surplus-"

    def __init__(self, members: list[str] | None, capacity_of: Callable[[str], float] | None = None) -> None:
        if members is not None:
            members = sorted(members, key=consumer_sort_key)
            if capacity_of is not None:
                members.sort(key=lambda m: -capacity_of(m))
        self.members = members
        self._member_set = frozenset(members or ())
        self._any_id = members is None
        self.opened: set[str] = set()
        self._next = 0  # f(k) only moves forward: no bin closes within one iteration
        self._minted = 0

    def allowed(self, consumer: str) -> bool:
        return self._any_id or consumer in self._member_set

    def open(self, preferred: str | None = None) -> str:
        """h(j,k): the preferred (previous) consumer if allowed and not open yet, else f(k)."""
        opened = self.opened
        if preferred is None or preferred in opened or not (self._any_id or preferred in self._member_set):
            preferred = self.lowest_unused()
        opened.add(preferred)
        return preferred

    def lowest_unused(self) -> str:
        """f(k), Eq. 12."""
        if self.members is not None:
            members = self.members
            while self._next < len(members) and members[self._next] in self.opened:
                self._next += 1
            if self._next < len(members):
                return members[self._next]
            prefix = self.SURPLUS_PREFIX
        else:
            prefix = self.MINTED_PREFIX
        while True:
            consumer = f"{prefix}{self._minted}"
            if consumer not in self.opened and consumer not in self._member_set:
                return consumer
            self._minted += 1

    def open_group(self, previous: list[str], count: int) -> list[str]:
        """A group of `count` consumers, as a fixed-size assignor sees it: the members (all of them),
        or else the previous consumers in id order, then the lowest unused ids."""
        if self.members is not None:
            return [self.open(m) for m in self.members]
        preferred = sorted(previous, key=consumer_sort_key)[:count]
        return [self.open(c) for c in preferred] + [self.open() for _ in range(count - len(preferred))]

    def candidates(self, previous: list[str], count: int) -> list[str]:
        """Every id this pool can hand out while opening at most `count` bins, in id order."""
        pool = set(previous) | self._member_set
        prefix = self.SURPLUS_PREFIX if self.members is not None else self.MINTED_PREFIX
        pool.update(f"{prefix}{n}" for n in range(count + len(pool) + 1))
        return sorted(pool, key=consumer_sort_key)


class Bins(ABC):
    """The new assignment under construction: open bins, their partitions and loads."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.rates = problem.rates
        self.pool = ConsumerPool(problem.members, problem.capacity_of)
        self.ids: list[str] = []
        self.cap: list[float] = []  # each bin's consumer's own capacity
        self.limit: list[float] = []  # cap up to float rounding of summed rates (model.within)
        self.load: list[float] = []
        self.held: list[list[int]] = []
        self.tie: list[tuple] = []  # consumer_sort_key of each bin: the tie-break

    @abstractmethod
    def find(self, j: int) -> int:
        """An open bin that takes partition j under this rule, or -1."""

    @abstractmethod
    def _track(self, b: int) -> None:
        """Record the new load of bin b in the rule's index (after it was opened and filled)."""

    def open(self, preferred: str | None = None) -> int:
        """createConsumer: a new, empty bin for consumer h(j,k) (`preferred` = g(j,k))."""
        consumer = self.pool.open(preferred)
        self.ids.append(consumer)
        capacity = self.problem.capacity_of(consumer)
        self.cap.append(capacity)
        self.limit.append(capacity * ROUNDING)
        self.load.append(0.0)
        self.held.append([])
        self.tie.append(consumer_sort_key(consumer))
        return len(self.ids) - 1

    def fits(self, b: int, j: int) -> bool:
        """An empty bin accepts anything, even a partition above capacity."""
        return not self.held[b] or self.load[b] + self.rates[j] <= self.limit[b]

    def residual(self, b: int) -> float:
        """Remaining capacity of bin b (infinite while empty: it takes anything)."""
        return self.limit[b] - self.load[b] if self.held[b] else math.inf

    def put(self, b: int, j: int) -> None:
        self.load[b] += self.rates[j]
        self.held[b].append(j)
        self._track(b)

    def fill(self, b: int, partitions: list[int]) -> list[int]:
        """Put partitions into bin b in order until the first that does not fit; return the rest."""
        rates, limit, held = self.rates, self.limit[b], self.held[b]
        load = self.load[b]
        for i, j in enumerate(partitions):
            if held and load + rates[j] > limit:
                rest = partitions[i:]
                break
            load += rates[j]
            held.append(j)
        else:
            rest = []
        self.load[b] = load
        self._track(b)
        return rest

    def place_open(self, j: int) -> bool:
        """assignOpenBin (Algorithm 1, line 8): into an open bin by the rule, never a new one."""
        b = self.find(j)
        if b < 0:
            return False
        self.put(b, j)
        return True

    def place(self, j: int) -> int:
        """assignBin: by the rule, else into a new bin h(j,k) (Eq. 14)."""
        b = self.find(j)
        if b < 0:
            b = self.open(self.problem.previous_owner[j])
        self.put(b, j)
        return b

    def assignment(self) -> dict[str, list[int]]:
        return dict(zip(self.ids, self.held))


class NextFitBins(Bins):
    """Next Fit: only the bin opened last is open. As in the published implementation, the first bin
    is open before any partition comes, so it is f(k) (Eq. 12); later ones are h(j,k) (Eq. 14)."""

    def place(self, j: int) -> int:
        if not self.ids:
            self.open()
        return super().place(j)

    def find(self, j: int) -> int:
        b = len(self.ids) - 1
        return b if b >= 0 and self.fits(b, j) else -1

    def _track(self, b: int) -> None:
        pass


class FirstFitBins(Bins):
    """First Fit: the first open bin in consumer-id order that fits (max-segment tree of residuals
    over every id the pool can open)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        universe = self.pool.candidates(list(problem.previous), problem.size)
        self.leaf_of = {consumer: r for r, consumer in enumerate(universe)}
        self.leaves = 1 << max(0, (len(universe) - 1).bit_length())
        self.tree = [-math.inf] * (2 * self.leaves)
        self.bin_at: dict[int, int] = {}

    def open(self, preferred: str | None = None) -> int:
        b = super().open(preferred)
        self.bin_at[self.leaf_of[self.ids[b]]] = b
        return b

    def _track(self, b: int) -> None:
        i = self.leaf_of[self.ids[b]] + self.leaves
        tree = self.tree
        tree[i] = self.residual(b)
        i >>= 1
        while i:
            left, right = tree[2 * i], tree[2 * i + 1]
            tree[i] = left if left > right else right
            i >>= 1

    def find(self, j: int) -> int:
        need, tree, leaves = self.rates[j], self.tree, self.leaves
        if tree[1] < need:
            return -1
        i = 1
        while i < leaves:
            i = 2 * i if tree[2 * i] >= need else 2 * i + 1
        return self.bin_at[i - leaves]


class SortedRuns:
    """A sorted multiset as runs of at most 2·RUN entries with their maxima: O(√n)-free inserts
    and deletes at C speed (bisect + list.insert on short lists)."""

    RUN = 256

    def __init__(self) -> None:
        self.runs: list[list[tuple]] = []
        self.maxes: list[tuple] = []

    @classmethod
    def of(cls, entries: list[tuple]) -> SortedRuns:
        """The entries, sorted once into runs of RUN."""
        made = cls()
        ordered = sorted(entries)
        made.runs = [ordered[i : i + cls.RUN] for i in range(0, len(ordered), cls.RUN)]
        made.maxes = [run[-1] for run in made.runs]
        return made

    def add(self, entry: tuple) -> None:
        runs, maxes = self.runs, self.maxes
        if not runs:
            runs.append([entry])
            maxes.append(entry)
            return
        r = bisect_left(maxes, entry)
        if r == len(runs):
            r -= 1
            runs[r].append(entry)
            maxes[r] = entry
        else:
            insort(runs[r], entry)
        run = runs[r]
        if len(run) > 2 * self.RUN:
            runs.insert(r + 1, run[self.RUN :])
            del run[self.RUN :]
            maxes.insert(r, run[-1])

    def remove(self, entry: tuple) -> None:
        r = bisect_left(self.maxes, entry)
        run = self.runs[r]
        del run[bisect_left(run, entry)]
        if not run:
            del self.runs[r]
            del self.maxes[r]
        else:
            self.maxes[r] = run[-1]

    def __iter__(self) -> Iterator[tuple]:
        for run in self.runs:
            yield from run

    def last_below(self, key: tuple) -> tuple | None:
        """The largest entry below `key`, or None."""
        r = bisect_left(self.maxes, key)
        if r < len(self.runs):
            run = self.runs[r]
            i = bisect_left(run, key)
            if i:
                return run[i - 1]
        return self.runs[r - 1][-1] if r else None

    def first_at_least(self, key: tuple) -> tuple | None:
        r = bisect_left(self.maxes, key)
        if r == len(self.runs):
            return None
        run = self.runs[r]
        return run[bisect_left(run, key)]


class BestFitBins(Bins):
    """Best Fit: the open bin with the least remaining capacity that still fits, ties to the lowest id
    (open bins sorted by (residual, id))."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.by_residual = SortedRuns()
        self.entry: dict[int, tuple] = {}

    def _track(self, b: int) -> None:
        old = self.entry.get(b)
        if old is not None:
            self.by_residual.remove(old)
        new = self.entry[b] = (self.limit[b] - self.load[b], self.tie[b], b)
        self.by_residual.add(new)

    def find(self, j: int) -> int:
        entry = self.by_residual.first_at_least((self.rates[j],))
        return -1 if entry is None else entry[2]


class WorstFitBins(Bins):
    """Worst Fit: the open bin with the most remaining capacity, if it fits; ties to the lowest id
    (min-heap of load − capacity with lazy deletion: loads only grow, so an entry below its bin's
    current value is stale)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.heap: list[tuple] = []

    def _track(self, b: int) -> None:
        heapq.heappush(self.heap, (self.load[b] - self.limit[b], self.tie[b], b))

    def find(self, j: int) -> int:
        heap, load, limit = self.heap, self.load, self.limit
        while heap:
            top, _, b = heap[0]
            if top == load[b] - limit[b]:
                return b if load[b] + self.rates[j] <= limit[b] else -1
            heapq.heappop(heap)
        return -1

    def place_open(self, j: int) -> bool:
        # find + put in one step (the hot path of Modified Worst Fit): the chosen bin is the top.
        b = self.find(j)
        if b < 0:
            return False
        load = self.load[b] = self.load[b] + self.rates[j]
        self.held[b].append(j)
        heapq.heapreplace(self.heap, (load - self.limit[b], self.tie[b], b))
        return True


FIT_RULES: dict[str, type[Bins]] = {
    "next": NextFitBins,
    "first": FirstFitBins,
    "best": BestFitBins,
    "worst": WorstFitBins,
}
