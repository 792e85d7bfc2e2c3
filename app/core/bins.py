"""Open consumers (bins) of the assignment being built, and the Any Fit rules that pick one.

The rules follow the published implementation of Landau et al. (§II-B, §VI-A): an empty bin
accepts any partition; bins are scanned in consumer-id order; Best Fit takes the bin with the least
remaining capacity that still fits, Worst Fit the one with the most, ties to the lowest id. Each bin
has its consumer's own capacity (`Problem.capacity_of`); when all are C, least remaining is most
loaded and most remaining least loaded, the paper's rules. Each rule keeps an index
(segment tree, sorted runs, heap) so that a placement does not scan every bin.

Bins are small integers (the order they were opened in); `ids[b]` is the consumer id.

Zone mode (a zone-aware request, `Problem.zones`; the Best and Worst Fit rules): each bin has a rack, and the
rule keeps one index per rack beside the global one. A partition goes to an open bin of one of its racks by the
rule, else into a new bin in one of its racks (a free member there, or a new consumer started there), else to
any open bin by the rule (across zones), else into a new bin h(j,k). What that costs in consumers the
algorithm's last step (app/core/algorithms/search.py `finish_zoned`) wins back.
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator

from app.core.model import ROUNDING, Problem, consumer_sort_key, sorted_consumers
from app.core.zones import NO_RACK


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


class ZonePool(ConsumerPool):
    """The pool of a zone-aware request, which also opens a consumer in a given rack (`open_in`) or in one of a
    partition's racks (`open_for`).

    With members: the free member of that rack, the largest capacity first, the lowest id among equals; none when
    every member there is open. Without members: the previous consumer of that rack not open yet (a pod does not
    change zone) or a new id no previous consumer has, the lower of the two; a new id takes the rack it is opened
    in. A consumer opened without a rack (`open`) has its known rack, or none yet (NO_RACK)."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.members, problem.capacity_of)
        zones = problem.zones
        assert zones is not None
        self.capacity_of = problem.capacity_of
        self.racks: dict[str, int] = dict(zones.of_consumer)
        self.in_rack = [0] * len(zones.names)  # open consumers per rack
        known = self.members if self.members is not None else sorted_consumers(problem.previous)
        self._known_in_rack: dict[int, list[str]] = {}
        for consumer in known:  # in the pool's order
            rack = zones.rack_of(consumer)
            if rack != NO_RACK:
                self._known_in_rack.setdefault(rack, []).append(consumer)
        self._rack_next = dict.fromkeys(self._known_in_rack, 0)
        self._known = self._member_set | frozenset(problem.previous)  # ids a new consumer may not take
        self._fresh = 0

    def rack_of(self, consumer: str) -> int:
        return self.racks.get(consumer, NO_RACK)

    def move(self, consumer: str, rack: int) -> None:
        """A new consumer's rack, chosen again (see SearchState.rerack)."""
        old = self.rack_of(consumer)
        if old != NO_RACK:
            self.in_rack[old] -= 1
        self.racks[consumer] = rack
        self.in_rack[rack] += 1

    def open(self, preferred: str | None = None) -> str:
        consumer = super().open(preferred)
        rack = self.rack_of(consumer)
        if rack != NO_RACK:
            self.in_rack[rack] += 1
        return consumer

    def free_in(self, rack: int) -> str | None:
        """The next known consumer of `rack` not open yet (members: the largest first)."""
        queue = self._known_in_rack.get(rack)
        if queue is None:
            return None
        i = self._rack_next[rack]
        while i < len(queue) and queue[i] in self.opened:
            i += 1
        self._rack_next[rack] = i
        return queue[i] if i < len(queue) else None

    def can_open(self, consumer: str) -> bool:
        return consumer not in self.opened and self.allowed(consumer)

    def can_open_for(self, racks: tuple[int, ...]) -> bool:
        """Whether a consumer can be opened in one of `racks`."""
        if self.members is None:
            return bool(racks)
        return any(self.free_in(r) is not None for r in racks)

    def open_for(self, racks: tuple[int, ...], preferred: str | None = None) -> str | None:
        """A consumer opened in one of `racks` (a partition's), or None: `preferred` (its previous consumer) if it
        runs there and is not open; else with members the largest free member of those racks (ties: the lowest
        id), without members one in the rack with the fewest open consumers (ties: the first by name)."""
        if not racks:
            return None
        if preferred is not None and self.rack_of(preferred) in racks and self.can_open(preferred):
            rack = self.rack_of(preferred)
        elif self.members is not None:
            free = [(c, r) for r in racks if (c := self.free_in(r)) is not None]
            if not free:
                return None
            rack = min(free, key=lambda cr: (-self.capacity_of(cr[0]), consumer_sort_key(cr[0])))[1]
        else:
            rack = min(racks, key=lambda r: (self.in_rack[r], r))
        return self.open_in(rack, preferred)

    def open_in(self, rack: int, preferred: str | None = None) -> str | None:
        """A consumer opened in `rack`: `preferred` (a previous consumer there) if it may, else as the class says;
        None when no member is free there."""
        if preferred is not None and self.rack_of(preferred) == rack and self.can_open(preferred):
            chosen = preferred
        else:
            known = self.free_in(rack)
            if self.members is None:
                fresh = self._fresh_id()
                if known is None or consumer_sort_key(fresh) < consumer_sort_key(known):
                    known = fresh
            if known is None:
                return None
            chosen = known
        self.opened.add(chosen)
        self.racks[chosen] = rack
        self.in_rack[rack] += 1
        return chosen

    def _fresh_id(self) -> str:
        while True:
            consumer = f"{self.MINTED_PREFIX}{self._fresh}"
            if consumer not in self.opened and consumer not in self._known:
                return consumer
            self._fresh += 1


class Bins(ABC):
    """The new assignment under construction: open bins, their partitions and loads."""

    ZONED = False
    """Whether the rule keeps an index per rack (zone mode, for a zone-aware request)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.rates = problem.rates
        self.zones = problem.zones if self.ZONED else None
        self.pool: ConsumerPool = ConsumerPool(problem.members, problem.capacity_of)
        self.ids: list[str] = []
        self.cap: list[float] = []  # each bin's consumer's own capacity
        self.limit: list[float] = []  # cap up to float rounding of summed rates (model.within)
        self.load: list[float] = []
        self.held: list[list[int]] = []
        self.tie: list[tuple] = []  # consumer_sort_key of each bin: the tie-break
        self.bin_of: dict[str, int] = {}
        if self.zones is not None:
            self.zone_pool = ZonePool(problem)
            self.pool = self.zone_pool
            self.rack: list[int] = []  # each bin's rack (zone mode)

    @abstractmethod
    def find(self, j: int) -> int:
        """An open bin that takes partition j under this rule, or -1."""

    @abstractmethod
    def _track(self, b: int) -> None:
        """Record the new load of bin b in the rule's index (after it was opened and filled)."""

    def find_local(self, j: int) -> int:
        """Zone mode: an open bin of one of j's racks that takes j under this rule, or -1."""
        raise NotImplementedError(f"{type(self).__name__} has no zone mode")

    def open(self, preferred: str | None = None) -> int:
        """createConsumer: a new, empty bin for consumer h(j,k) (`preferred` = g(j,k))."""
        return self._add(self.pool.open(preferred))

    def local_choice(self, j: int) -> int | None:
        """Zone mode: the open bin of j's racks `place` puts j into, -1 where it opens one there, None where j
        cannot be placed in its zone."""
        b = self.find_local(j)
        if b >= 0:
            return b
        return -1 if self.zone_pool.can_open_for(self.zones.of_partition[j]) else None  # type: ignore[union-attr]

    def open_local(self, j: int) -> int:
        """Zone mode: a new bin in one of j's racks (ZonePool.open_for; h(j,k) where j's previous consumer runs
        there), or -1."""
        consumer = self.zone_pool.open_for(self.zones.of_partition[j], self.problem.previous_owner[j])  # type: ignore[union-attr]
        return -1 if consumer is None else self._add(consumer)

    def _add(self, consumer: str) -> int:
        self.bin_of[consumer] = len(self.ids)
        if self.zones is not None:
            self.rack.append(self.zone_pool.rack_of(consumer))
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
        """assignOpenBin (Algorithm 1, line 8): into an open bin by the rule, never a new one (zone mode: one
        of j's racks)."""
        b = self.find(j) if self.zones is None else self.find_local(j)
        if b < 0:
            return False
        self.put(b, j)
        return True

    def choose(self, j: int) -> int:
        """The open bin `place` puts j into, or -1 where it opens one."""
        if self.zones is None:
            return self.find(j)
        b = self.local_choice(j)
        return self.find(j) if b is None else b

    def place(self, j: int) -> int:
        """assignBin: by the rule, else into a new bin h(j,k) (Eq. 14). Zone mode: see the module."""
        b = self.choose(j)
        if b < 0 and self.zones is not None:
            b = self.open_local(j)
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

    ZONED = True

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.by_residual = SortedRuns()
        self.entry: dict[int, tuple] = {}
        self.rack_residual: dict[int, SortedRuns] = {}  # zone mode: the same, per rack

    def _track(self, b: int) -> None:
        old = self.entry.get(b)
        new = self.entry[b] = (self.limit[b] - self.load[b], self.tie[b], b)
        if old is not None:
            self.by_residual.remove(old)
        self.by_residual.add(new)
        if self.zones is not None and self.rack[b] != NO_RACK:
            runs = self.rack_residual.setdefault(self.rack[b], SortedRuns())
            if old is not None:
                runs.remove(old)
            runs.add(new)

    def find(self, j: int) -> int:
        entry = self.by_residual.first_at_least((self.rates[j],))
        return -1 if entry is None else entry[2]

    def find_local(self, j: int) -> int:
        need = (self.rates[j],)
        best = None
        for r in self.zones.of_partition[j]:  # type: ignore[union-attr]
            runs = self.rack_residual.get(r)
            entry = None if runs is None else runs.first_at_least(need)
            if entry is not None and (best is None or entry < best):
                best = entry
        return -1 if best is None else best[2]


class WorstFitBins(Bins):
    """Worst Fit: the open bin with the most remaining capacity, if it fits; ties to the lowest id
    (min-heap of load − capacity with lazy deletion: loads only grow, so an entry below its bin's
    current value is stale)."""

    ZONED = True

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.heap: list[tuple] = []
        self.rack_heap: dict[int, list[tuple]] = {}  # zone mode: the same, per rack

    def _track(self, b: int) -> None:
        entry = (self.load[b] - self.limit[b], self.tie[b], b)
        heapq.heappush(self.heap, entry)
        if self.zones is not None and self.rack[b] != NO_RACK:
            heapq.heappush(self.rack_heap.setdefault(self.rack[b], []), entry)

    def find(self, j: int) -> int:
        return self._top(self.heap, j)

    def _top(self, heap: list[tuple], j: int) -> int:
        """The bin of the heap's valid top if j fits in it, else -1 (stale entries dropped on the way)."""
        load, limit = self.load, self.limit
        while heap:
            top, _, b = heap[0]
            if top == load[b] - limit[b]:
                return b if load[b] + self.rates[j] <= limit[b] else -1
            heapq.heappop(heap)
        return -1

    def find_local(self, j: int) -> int:
        best: tuple | None = None
        for r in self.zones.of_partition[j]:  # type: ignore[union-attr]
            heap = self.rack_heap.get(r)
            if heap is not None and self._top(heap, j) >= 0 and (best is None or heap[0] < best):
                best = heap[0]
        return -1 if best is None else best[2]

    def place_open(self, j: int) -> bool:
        if self.zones is not None:
            return super().place_open(j)
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
