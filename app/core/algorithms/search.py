"""An assignment under search: consumers (bins) with their partitions, loads, capacities and, for a zone-aware
request, racks; the moves of the search, charged to the migration budget; the steps that close a consumer
(`dissolve`) and that bring a partition read across zones into its zone (`localize`).

`repack` searches on it (app/core/algorithms/repack.py) for the least W·consumers + Z·cross-zone rate / C +
Rscore. The zone-aware Best and Worst Fit algorithms (Any Fit, Modified Any Fit) end on it (`finish_zoned`),
with the objectives in order: consumers, then cross-zone rate, then moved rate (weights far apart).

Work is counted, never timed (one unit per partition moved or examined, per consumer ranked), so the same input
gives the same answer on any machine.
"""

from __future__ import annotations

import itertools

from app.core.algorithms.budget import Spending
from app.core.bins import Bins, ConsumerPool, SortedRuns, ZonePool
from app.core.model import ROUNDING, ROUNDING_ERROR, Problem, consumer_sort_key, within
from app.core.zones import NO_RACK

EJECTION_TRIES = 32
"""Consumers (those with the most room) a partition that fits nowhere may eject a smaller one from."""
SWAP_TRIES = 8
"""Consumers (those with the most room in its racks) a partition read across zones may swap with."""
CONSUMER_FIRST = 1e12
"""The weight of a consumer (in units of C) where consumers come before everything else."""
ZONE_FIRST = 1e6
"""The weight of the cross-zone rate where it comes before the moved rate."""
FAILED_MERGES = 64
"""`merge` stops after this many neighbourhoods in a row it could not improve."""
FAILED_LOCALIZES = 64
"""`localize` stops trying, for the rest of a pass, the partitions of the racks whose last this many (largest first)
it could not bring into their zone: where a zone has no room left, the smaller ones fail alike."""
FAILED_CLOSES = 16
"""`consolidate` stops a pass after this many consumers in a row it could not close (plus 4 per rack)."""


class SearchState:
    """The assignment under search. `weight` W: one consumer costs W·C; `zone_weight` Z: a rate r read across
    zones costs Z·r; a move costs its rate."""

    def __init__(
        self, problem: Problem, spending: Spending, weight: float, zone_weight: float, k: int = 4, nodes: int = 1_000
    ) -> None:
        self.problem = problem
        self.k = k  # consumers re-placed together by `resolve`
        self.nodes = nodes  # branch-and-bound nodes one `resolve` may take
        self.rates = problem.rates
        self.weight = weight
        self.zone_weight = zone_weight
        self.spending = spending
        self.zones = problem.zones
        self.pool: ConsumerPool = ConsumerPool(problem.members, problem.capacity_of)
        if self.zones is not None:
            self.pool = self.zone_pool = ZonePool(problem)
        self.ids: list[str] = []
        self.tie: list[tuple] = []  # consumer_sort_key of each bin's id
        self.cap: list[float] = []
        self.held: list[list[int]] = []
        self.load: list[float] = []
        self.rack: list[int] = []  # each consumer's rack (NO_RACK: none known, or none chosen yet)
        self.bin_of: dict[str, int] = {}
        self.owner: list[int] = [-1] * problem.size  # partition → its bin
        self.previous_bin: list[int] = [-1] * problem.size  # partition → its previous consumer's bin, if open
        self.cross = 0.0  # the rate read across zones (zone mode)
        self.idle: set[int] = set()  # consumers emptied by the search
        self.work = 0  # search work done
        self.exact_left: int | None = None  # work `localize`'s exact re-placements may still spend (None: any)
        self.by_slack = SortedRuns()  # non-empty consumers by (−remaining capacity, id, bin)
        self.slack_entry: dict[int, tuple] = {}
        self.rack_slack: dict[int, SortedRuns] = {}  # zone mode: the same, per rack

    # -- the state ---------------------------------------------------------------------------------------

    def open(self, preferred: str | None = None) -> int:
        return self.add(self.pool.open(preferred))

    def open_local(self, j: int) -> int:
        """Zone mode: a new consumer in one of j's racks (ZonePool.open_for), or -1."""
        consumer = self.zone_pool.open_for(self.zones.of_partition[j], self.problem.previous_owner[j])  # type: ignore[union-attr]
        return -1 if consumer is None else self.add(consumer)

    def add(self, consumer: str) -> int:
        """A consumer the pool opened, as an empty bin."""
        b = len(self.ids)
        self.ids.append(consumer)
        self.tie.append(consumer_sort_key(consumer))
        self.cap.append(self.problem.capacity_of(consumer))
        self.held.append([])
        self.load.append(0.0)
        self.rack.append(self.zone_pool.rack_of(consumer) if self.zones is not None else NO_RACK)
        self.bin_of[consumer] = b
        return b

    def local(self, j: int, b: int) -> bool:
        """Zone mode: whether partition j on bin b is read within its zone."""
        return self.zones.local(j, self.rack[b])  # type: ignore[union-attr]

    def put(self, b: int, j: int) -> None:
        self.idle.discard(b)
        self.held[b].append(j)
        self.load[b] += self.rates[j]
        self.owner[j] = b
        if self.zones is not None and not self.local(j, b):
            self.cross += self.rates[j]
        self.track(b)

    def take(self, b: int, j: int) -> None:
        self.held[b].remove(j)
        if not self.held[b]:
            self.idle.add(b)
        self.load[b] -= self.rates[j]
        self.owner[j] = -1
        if self.zones is not None and not self.local(j, b):
            self.cross -= self.rates[j]
        self.track(b)

    def track(self, b: int) -> None:
        old = self.slack_entry.pop(b, None)
        runs = self.rack_slack.get(self.rack[b]) if self.zones is not None and self.rack[b] != NO_RACK else None
        if old is not None:
            self.by_slack.remove(old)
            if runs is not None:
                runs.remove(old)
        if self.held[b]:
            entry = self.slack_entry[b] = (self.load[b] - self.cap[b], self.tie[b], b)
            self.by_slack.add(entry)
            if runs is not None:
                runs.add(entry)

    def index(self) -> None:
        """The consumer indices (and the cross-zone rate) of bins filled directly, all at once: faster than one
        insert per consumer."""
        entries = [(self.load[b] - self.cap[b], self.tie[b], b) for b in range(len(self.ids))]
        entries = [entry for entry in entries if self.held[entry[2]]]
        self.by_slack = SortedRuns.of(entries)
        self.slack_entry = {entry[2]: entry for entry in entries}
        if self.zones is not None:
            by_rack: dict[int, list[tuple]] = {}
            for entry in entries:
                if self.rack[entry[2]] != NO_RACK:
                    by_rack.setdefault(self.rack[entry[2]], []).append(entry)
            self.rack_slack = {r: SortedRuns.of(listed) for r, listed in by_rack.items()}
            for r in range(len(self.zones.names)):
                self.rack_slack.setdefault(r, SortedRuns())
            self.cross = sum(self.zones.cross_zone(self.rates, held, self.rack[b]) for b, held in enumerate(self.held))

    def fits(self, b: int, j: int) -> bool:
        """An empty consumer takes anything; otherwise within its capacity."""
        return not self.held[b] or within(self.load[b] + self.rates[j], self.cap[b])

    def cost(self, j: int, b: int) -> bool:
        """Whether partition j on bin b is a move (it had another consumer)."""
        return self.problem.previous_owner[j] is not None and self.previous_bin[j] != b

    def best_fit(self, rate: float, excluded: int = -1, runs: SortedRuns | None = None) -> int:
        """The open consumer with the least remaining capacity that takes `rate` (among `runs`: one rack's),
        other than `excluded`, or −1. The entries are (load − capacity, id, bin): the last one below rate − 0
        (up to rounding) fits."""
        runs = self.by_slack if runs is None else runs
        found = runs.last_below((self.problem.capacity * ROUNDING_ERROR - rate,))
        if found is not None and found[2] == excluded:  # the next one down has more room
            found = runs.last_below(found)
        if found is None:
            return -1
        b = found[2]
        return b if within(self.load[b] + rate, self.cap[b]) else -1

    def best_fit_local(self, j: int, excluded: int = -1) -> int:
        """Zone mode: the consumer of one of j's racks with the least remaining capacity that takes j, or −1."""
        best = -1
        for r in self.zones.of_partition[j]:  # type: ignore[union-attr]
            b = self.best_fit(self.rates[j], excluded, self.rack_slack[r])
            if b >= 0 and (best < 0 or self.slack_entry[b] > self.slack_entry[best]):
                best = b
        return best

    def move(self, j: int, b: int) -> None:
        """Partition j to bin b (−1: out of every bin), its cost charged or refunded (one unit of work)."""
        self.work += 1
        was = self.owner[j]
        if was >= 0:
            if self.cost(j, was):
                self.spending.rate -= self.rates[j]
                self.spending.moves -= 1
            self.take(was, j)
        if b >= 0:
            self.put(b, j)
            if self.cost(j, b):
                self.spending.spend(j)

    def affordable(self, partitions: list[int]) -> bool:
        """Whether the budget affords moving all these partitions."""
        spending = self.spending
        rate, moves = spending.rate, spending.moves
        ok = True
        for j in partitions:
            ok = ok and spending.affords(j)
            spending.spend(j)
        spending.rate, spending.moves = rate, moves
        return ok

    # -- steps ---------------------------------------------------------------------------------------------

    def targets(self) -> list[int]:
        """Open consumers, least utilised first, ties by id (one unit of work each)."""
        self.work += len(self.ids)
        return sorted(
            (b for b in range(len(self.ids)) if self.held[b]),
            key=lambda b: (self.load[b] / self.cap[b], self.tie[b]),
        )

    def dissolve(self, target: int, _limit: int = 0) -> bool:
        """Close the target if each of its partitions, largest first, finds another consumer (`relocate`)
        and that lowers the objective within the budget; else leave everything as it was."""
        rates = self.rates
        items = sorted(self.held[target], key=lambda j: (-rates[j], self.problem.keys[j]))
        before_rate, before_moves, before_cross = self.spending.rate, self.spending.moves, self.cross
        journal: list[tuple[int, int]] = []  # (partition, the bin it was in), to undo
        for j in items:
            journal.append((j, target))
            self.move(j, -1)
        closed = all(self.relocate(j, target, journal) for j in items)
        gain = self.weight * self.problem.capacity - (self.spending.rate - before_rate)
        if self.zones is not None:
            gain -= self.zone_weight * (self.cross - before_cross)
        if closed and gain > 1e-9 and self.spending.within():
            return True
        for j, b in reversed(journal):
            self.move(j, b)
        # exactly, without float drift
        self.spending.rate, self.spending.moves, self.cross = before_rate, before_moves, before_cross
        return False

    def relocate(self, j: int, target: int, journal: list[tuple[int, int]]) -> bool:
        """Put j (out of every bin) on another open consumer: its previous one if it fits, else Best Fit
        (the least remaining capacity that fits), else by ejecting a smaller partition from one of the
        EJECTION_TRIES consumers with the most room into Best Fit elsewhere. Zone mode: a consumer of j's racks
        first (its previous one, else Best Fit among them)."""
        rates = self.rates
        self.work += 1
        home = self.previous_bin[j]
        if self.zones is not None:
            if home >= 0 and home != target and self.held[home] and self.local(j, home) and self.fits(home, j):
                self.move(j, home)
                return True
            b = self.best_fit_local(j)
            if b >= 0:
                self.move(j, b)
                return True
        if home >= 0 and home != target and self.held[home] and self.fits(home, j):
            self.move(j, home)
            return True
        b = self.best_fit(rates[j])
        if b >= 0:
            self.move(j, b)
            return True
        roomiest = [b for _, _, b in itertools.islice(self.by_slack, EJECTION_TRIES)]  # moves below reorder it
        for b in roomiest:
            for y in sorted(self.held[b], key=lambda i: (rates[i], self.problem.keys[i])):
                self.work += 1
                if rates[y] >= rates[j] or not within(self.load[b] - rates[y] + rates[j], self.cap[b]):
                    continue
                journal.append((y, b))
                self.move(y, -1)
                other = self.best_fit(rates[y], b)
                if other < 0:
                    self.move(y, b)
                    journal.pop()
                    continue
                self.move(y, other)
                self.move(j, b)
                return True
        return False

    def resolve(self, target: int, limit: int) -> bool:
        return self.improve(self.neighbourhood(target), limit)

    def improve(self, bins: list[int], limit: int) -> bool:
        """Re-place the partitions of `bins` among them exactly (`Neighbourhood`); whether a better placement was
        kept."""
        spent, better = Neighbourhood(self, bins).solve(min(self.nodes, limit - self.work))
        self.work += spent
        if better is None:
            return False
        for j, b in better.items():
            if self.owner[j] != b:
                self.move(j, b)
        return True

    def neighbourhood(self, target: int) -> list[int]:
        """The target and the k − 1 other open consumers with the most remaining capacity (ties by id)."""
        chosen = [target]
        for _, _, b in self.by_slack:
            if len(chosen) == self.k:
                break
            if b != target:
                chosen.append(b)
        return chosen

    def consolidate(self, limit: int) -> int:
        """Passes of `dissolve` over the consumers, least utilised first, until a pass closes none, it fails
        FAILED_CLOSES times in a row, or `limit` units of work are spent. Returns the consumers closed."""
        closed = 0
        give_up = FAILED_CLOSES + 4 * len(self.zones.names if self.zones is not None else ())
        while True:
            failures, before = 0, closed
            free = self.free_room()
            for target in self.targets():
                if self.work >= limit or failures >= give_up:
                    break
                room = max(0.0, self.cap[target] * ROUNDING - self.load[target])
                if not self.held[target] or self.load[target] > free - room:  # the others cannot hold it
                    continue
                if self.dissolve(target):
                    closed += 1
                    failures = 0
                    free = self.free_room()
                else:
                    failures += 1
            if closed == before or self.work >= limit:
                return closed

    def free_room(self) -> float:
        """The capacity left on the open consumers (one unit of work each)."""
        self.work += len(self.ids)
        return sum(max(0.0, cap * ROUNDING - load) for cap, load, held in zip(self.cap, self.load, self.held) if held)

    def merge(self, limit: int) -> int:
        """One pass of `resolve` over the consumers, least utilised first, each with the consumers of the most room
        (the partly filled ones a split by zone leaves), until it fails FAILED_MERGES times in a row or `limit`
        units of work are spent; returns the steps kept."""
        kept = failures = 0
        for target in self.targets():
            if self.work >= limit or failures >= FAILED_MERGES:
                break
            if not self.held[target]:
                continue
            bins = self.neighbourhood(target)
            caps = [self.cap[b] for b in bins]
            if sum(self.load[b] for b in bins) > (sum(caps) - min(caps)) * ROUNDING:  # no consumer can go
                continue
            if self.resolve(target, limit):
                kept += 1
                failures = 0
            else:
                failures += 1
        return kept

    def rerack(self) -> None:
        """Zone mode, without members: each new consumer (one that did not run before) runs in the rack where the
        most of its rate is local (ties: its rack, then the first by name)."""
        zones, previous = self.zones, self.problem.previous
        if zones is None or self.problem.members is not None:
            return
        rates = self.rates
        for b, held in enumerate(self.held):
            if not held or self.ids[b] in previous:
                continue
            self.work += len(held)
            best = zones.best_rack(rates, held)
            if best == NO_RACK or best == self.rack[b]:
                continue
            if zones.cross_zone(rates, held, best) >= zones.cross_zone(rates, held, self.rack[b]):
                continue  # a tie: it stays where it was opened
            items = list(held)
            for j in items:
                self.take(b, j)
            self.rack[b] = best
            self.zone_pool.move(self.ids[b], best)
            for j in items:
                self.put(b, j)

    def localize(self, limit: int) -> int:
        """Zone mode: each partition read across zones, largest first, moves to a consumer of its racks with room
        (its previous one first) or swaps with a partition of one of the SWAP_TRIES such consumers with the most
        room, whichever lowers Z·cross-zone rate + moved rate the most, within the budget; where neither does,
        its consumer and the k − 1 of those with the most room are re-placed exactly (`improve`). Passes until
        one keeps nothing or `limit` units of work are spent; within a pass, the partitions of racks whose last
        FAILED_LOCALIZES failed are not tried. Returns the steps kept."""
        zones = self.zones
        if zones is None:
            return 0
        of_partition, kept = zones.of_partition, 0
        while self.work < limit:
            self.work += len(self.owner) // 16 + 1
            crossing = [j for j, b in enumerate(self.owner) if of_partition[j] and not self.local(j, b)]
            before = kept
            failed: dict[tuple[int, ...], int] = {}  # per racks: partitions in a row left across zones
            for j in self.problem.decreasing(crossing):
                if self.work >= limit:
                    break
                racks = of_partition[j]
                if self.local(j, self.owner[j]) or failed.get(racks, 0) >= FAILED_LOCALIZES:
                    continue
                if self._localize(j, limit):
                    kept += 1
                    failed[racks] = 0
                else:
                    failed[racks] = failed.get(racks, 0) + 1
            if kept == before:
                break
        return kept

    def _gain(self, j: int, a: int, b: int) -> float:
        """What moving j from bin a to bin b lowers Z·cross + moved rate by."""
        zone = self.zone_weight * self.rates[j] * (self.local(j, b) - self.local(j, a))
        return zone - self.rates[j] * (self.cost(j, b) - self.cost(j, a))

    def _localize(self, j: int, limit: int) -> bool:
        rates, a = self.rates, self.owner[j]
        home = self.previous_bin[j]
        b = home if home >= 0 and home != a and self.local(j, home) and self.fits(home, j) else self.best_fit_local(j)
        best, step = 1e-9 * self.problem.capacity, None
        if b >= 0:
            self.work += 1
            gain = self._gain(j, a, b)
            if gain > best and (not self.cost(j, b) or self.cost(j, a) or self.spending.affords(j)):
                best, step = gain, (b, -1)
        room_a = self.cap[a] * ROUNDING - self.load[a]
        racks = self.zones.of_partition[j]  # type: ignore[union-attr]
        tries = [entry[2] for r in racks for entry in itertools.islice(self.rack_slack[r], SWAP_TRIES)]
        for other in tries:
            if other == a:
                continue
            room = self.cap[other] * ROUNDING - self.load[other]
            for y in self.held[other]:
                self.work += 1
                if not rates[j] - room <= rates[y] <= rates[j] + room_a:
                    continue
                gain = self._gain(j, a, other) + self._gain(y, other, a)
                if gain > best:
                    best, step = gain, (other, y)
        if step is None:  # its consumer, an idle one of its racks and those of its racks with the most room
            bins = [a, *dict.fromkeys(b for b in tries if b != a)][: self.k - 1]
            idle = self.idle_in(racks)
            if idle >= 0:
                bins.append(idle)
            if len(bins) < 2 or (self.exact_left is not None and self.exact_left <= 0):
                return False
            work = self.work
            better = self.improve(bins, limit)
            if self.exact_left is not None:
                self.exact_left -= self.work - work
            return better
        b, y = step
        before = self.spending.rate, self.spending.moves, self.cross
        self._exchange(j, b, y, a)
        if self.spending.within() or (self.spending.moves <= before[1] and self.spending.rate <= before[0]):
            return True
        self._exchange(j, a, y, b)  # undone
        self.spending.rate, self.spending.moves, self.cross = before
        return False

    def _exchange(self, j: int, to_j: int, y: int, to_y: int) -> None:
        """j to bin `to_j` and, unless y is −1, y to bin `to_y` (y out first, so each finds its room)."""
        if y >= 0:
            self.move(y, -1)
        self.move(j, to_j)
        if y >= 0:
            self.move(y, to_y)

    def idle_in(self, racks: tuple[int, ...]) -> int:
        """Zone mode: an empty consumer in one of `racks` (one closed before, else one the pool opens there), or −1:
        with it a neighbourhood can trade the consumer it closes for one of another zone."""
        for b in sorted(self.idle):
            if self.rack[b] in racks:
                return b
        consumer = self.zone_pool.open_for(racks)
        if consumer is None:
            return -1
        b = self.add(consumer)
        self.idle.add(b)
        return b

    def assignment(self) -> dict[str, list[int]]:
        keys = self.problem.keys
        return {self.ids[b]: sorted(held, key=keys.__getitem__) for b, held in enumerate(self.held) if held}

    def chosen_racks(self) -> dict[str, str]:
        """Zone mode: the rack of each consumer holding partitions whose rack is known or was chosen."""
        if self.zones is None:
            return {}
        names = self.zones.names
        return {self.ids[b]: names[self.rack[b]] for b, held in enumerate(self.held) if held and self.rack[b] >= 0}

    def overloaded(self) -> list[str]:
        """Consumers holding more than one partition above their capacity."""
        return [
            self.ids[b] for b, held in enumerate(self.held) if len(held) > 1 and not within(self.load[b], self.cap[b])
        ]


class Neighbourhood:
    """The partitions of a few consumers, re-placed among them for the least W·used + moved rate / C (zone mode:
    + Z·cross-zone rate / C)."""

    def __init__(self, state: SearchState, bins: list[int]) -> None:
        self.state = state
        self.bins = bins
        rates = state.rates
        self.items = sorted((j for b in bins for j in state.held[b]), key=lambda j: (-rates[j], state.problem.keys[j]))
        capacity = state.problem.capacity
        k = len(bins)
        # The cost of j on each bin of the neighbourhood, in units of C (0 where it stays or was new).
        self.moves = [[state.cost(j, b) for b in bins] for j in self.items]
        self.costs = [[rates[j] / capacity if move else 0.0 for move in row] for j, row in zip(self.items, self.moves)]
        # What j on each bin adds to the objective: its cost, and where it is read across zones Z·rate / C.
        self.values = self.costs
        if state.zones is not None:
            zone = state.zone_weight / capacity
            self.values = [
                [cost + (0.0 if state.local(j, b) else zone * rates[j]) for cost, b in zip(row, bins)]
                for j, row in zip(self.items, self.costs)
            ]
        self.caps = [state.cap[b] * ROUNDING for b in bins]
        # Each partition tries the consumers it costs least on first (ties: the target, then by slack).
        self.order = [
            sorted(range(k), key=list(zip(value, move)).__getitem__) for value, move in zip(self.values, self.moves)
        ]
        # equal_from[s][t]: from which partition on consumers s and t are alike (same capacity, same costs for
        # every partition after): an empty one is then not tried after the other.
        n = len(self.items)
        self.equal_from = [[n + 1] * k for _ in range(k)]
        for a in range(k):
            for b in range(a + 1, k):
                if self.caps[a] != self.caps[b]:
                    continue
                i = n
                while (
                    i > 0
                    and self.moves[i - 1][a] == self.moves[i - 1][b]
                    and self.values[i - 1][a] == self.values[i - 1][b]
                ):
                    i -= 1
                self.equal_from[a][b] = self.equal_from[b][a] = i
        self.weight = state.weight
        current = [bins.index(state.owner[j]) for j in self.items]
        used = len(set(current))
        moved = sum(self.costs[i][slot] for i, slot in enumerate(current))
        value = sum(self.values[i][slot] for i, slot in enumerate(current))
        self.best_value = self.weight * used + value - 1e-9  # only strictly better placements are kept
        self.best: list[int] | None = None
        self.suffix = [0.0] * (n + 1)
        for i in range(n - 1, -1, -1):
            self.suffix[i] = self.suffix[i + 1] + rates[self.items[i]]
        spending = state.spending
        inside = [j for j in self.items if state.cost(j, state.owner[j])]
        self.free_rate = None if spending.max_rate is None else (spending.max_rate - spending.rate) / capacity + moved
        self.free_moves = None if spending.max_moves is None else spending.max_moves - spending.moves + len(inside)

    def solve(self, limit: int) -> tuple[int, dict[int, int] | None]:
        """(work spent, a better placement partition → bin, or None). Work: search nodes, plus one per
        partition and consumer for setting the neighbourhood up."""
        k, n = len(self.bins), len(self.items)
        rates = self.state.rates
        items, costs, values, moves_of, caps, order, equal_from, suffix = (
            self.items,
            self.costs,
            self.values,
            self.moves,
            self.caps,
            self.order,
            self.equal_from,
            self.suffix,
        )
        weight, free_rate, free_moves = self.weight, self.free_rate, self.free_moves
        total = suffix[0]
        load = [0.0] * k
        count = [0] * k
        chosen = [0] * n
        nodes = n * k

        def dfs(i: int, used: int, used_cap: float, value: float, moved: float, moves: int) -> None:
            nonlocal nodes
            nodes += 1
            if i == n:
                if weight * used + value < self.best_value:
                    self.best_value = weight * used + value
                    self.best = chosen.copy()
                return
            # Lower bound: the rest needs a consumer more unless the used ones have room for all of it.
            extra = 0 if suffix[i] <= used_cap - (total - suffix[i]) else 1
            if weight * (used + extra) + value >= self.best_value or nodes > limit:
                return
            rate, row, worth, is_move = rates[items[i]], costs[i], values[i], moves_of[i]
            tried_empty: list[int] = []
            for slot in order[i]:
                empty = not count[slot]
                if empty:
                    if any(equal_from[t][slot] <= i for t in tried_empty):
                        continue
                    tried_empty.append(slot)
                elif load[slot] + rate > caps[slot]:
                    continue
                step, move = row[slot], is_move[slot]
                if move and (
                    (free_rate is not None and moved + step > free_rate + ROUNDING_ERROR)  # in units of C
                    or (free_moves is not None and moves >= free_moves)
                ):
                    continue
                load[slot] += rate
                count[slot] += 1
                chosen[i] = slot
                if empty:
                    dfs(i + 1, used + 1, used_cap + caps[slot], value + worth[slot], moved + step, moves + move)
                else:
                    dfs(i + 1, used, used_cap, value + worth[slot], moved + step, moves + move)
                load[slot] -= rate
                count[slot] -= 1

        dfs(0, 0, 0.0, 0.0, 0.0, 0)
        if self.best is None:
            return nodes, None
        return nodes, {j: self.bins[slot] for j, slot in zip(items, self.best)}


def finish_zoned(problem: Problem, bins: Bins, spending: Spending) -> SearchState:
    """The last step of a zone-aware Best or Worst Fit algorithm: its bins as a search state, then consumers
    closed (`consolidate`), new consumers moved to their best rack (`rerack`) and partitions brought into their
    zone (`localize`), with consumers before cross-zone rate before moved rate, within the budget. Work: at most
    20 units per partition plus 50 000, so it stays n log n; of it, `localize`'s exact re-placements take at most
    one unit per partition plus 50 000 (past a few hundred of them, each of a thousand nodes, they bring little:
    a short zone's consumers are full)."""
    state = SearchState(problem, spending, CONSUMER_FIRST, ZONE_FIRST)
    state.pool = state.zone_pool = bins.zone_pool  # the ids and racks opened so far
    for b, consumer in enumerate(bins.ids):
        state.add(consumer)
        state.held[b] = list(bins.held[b])
        state.load[b] = bins.load[b]
        for j in bins.held[b]:
            state.owner[j] = b
    for j, was in enumerate(problem.previous_owner):
        if was is not None:
            state.previous_bin[j] = state.bin_of.get(was, -1)
    state.index()
    limit = 20 * problem.size + 50_000
    state.exact_left = problem.size + 50_000
    state.consolidate(limit // 2)
    state.merge(limit)
    state.rerack()
    state.localize(limit)
    return state
