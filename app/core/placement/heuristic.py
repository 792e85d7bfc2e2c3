"""The fast replica placement heuristic, for clusters too large for the exact model.

It starts from the current placement, so it moves only what it must or what pays (seed 003's objective on a
running cluster), in three steps:

1. Repair: a replica on a broker that is gone, or in a rack its replica set already uses, is lifted; each
   broker above a capacity sheds replicas, each time the smallest one that alone clears the excess (else the
   largest on the dimension most over); the lifted replicas are placed largest first, each on the feasible
   broker it left before if any (no copy), else the one least utilised after it (Worst Fit: balance).
2. Objective `balance`: moves that lower the most utilised broker, least bytes first — its smallest replica
   that can go somewhere feasible without making that place as utilised as the peak was, else a swap of one of
   its replicas with a smaller one of a less utilised broker — until none is left or `max_bytes_moved` is
   spent.
3. Objective `brokers`: empties the least utilised brokers into the others (Best Fit) while all of a broker's
   replicas fit elsewhere.

Objective `moves` stops after the repair: any further move costs bytes. Deterministic: ties by broker id,
then by (topic, partition).
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort

from app.core.errors import AssignmentError, ErrorCode
from app.core.placement.model import GONE, Objective, PlacementProblem, lower_bounds
from app.core.placement.solver import Solution, Solver, register

EPSILON = 1e-12
# a swap's search is bounded so large clusters stay fast: the least utilised brokers it looks at, the replicas
# of each side it tries, and the least it must lower the peak (the exact model's resolution)
SWAP_TARGETS = 8
SWAP_CANDIDATES = 64
SWAP_GAIN = 1e-4


class Greedy:
    """A placement being changed: replica sets, broker loads, and each broker's replicas sorted by size. It starts
    from the current placement, from none (`keep_current=False`), or from `start` (bytes still counted from the
    current one)."""

    def __init__(
        self, problem: PlacementProblem, keep_current: bool = True, start: list[list[int]] | None = None
    ) -> None:
        self.problem = problem
        parts = problem.partitions
        self.size = [p.size for p in parts]
        self.throughput = problem.flow  # network units
        brokers = range(len(problem.brokers))
        self.disk = [0 for _ in brokers]
        self.network = [0 for _ in brokers]
        self.hosted: list[list[tuple[int, int, int]]] = [[] for _ in brokers]  # (size, throughput, p), sorted
        self.original = [set(held) - {GONE} for held in problem.current] if keep_current else [set() for _ in parts]
        self.sets: list[list[int]] = [[] for _ in parts]
        self.lifted: list[int] = []  # partitions with a replica to place, once per replica
        self.moved = 0  # bytes copied so far: kept current replicas cost nothing
        for p, held in enumerate(problem.current if start is None else start):
            for b in held:
                if not keep_current or b == GONE or not self.rack_free(p, b):
                    self.lifted.append(p)
                else:
                    self.add(p, b)
        self.budget = problem.options.max_bytes_moved

    def rack_free(self, p: int, b: int, leaving: int = GONE) -> bool:
        """Whether broker b may take a replica of p: not on it yet, and its rack unused by p (with racks) — but
        for the replica on `leaving`, the one that moves."""
        held = self.sets[p]
        if b in held:
            return False
        if not self.problem.rack_aware:
            return True
        rack_of = self.problem.rack_of
        return all(rack_of[other] != rack_of[b] for other in held if other != leaving)

    def add(self, p: int, b: int) -> None:
        self.sets[p].append(b)
        self.disk[b] += self.size[p]
        self.network[b] += self.throughput[p]
        insort(self.hosted[b], (self.size[p], self.throughput[p], p))
        if b not in self.original[p]:
            self.moved += self.size[p]

    def remove(self, p: int, b: int) -> None:
        self.sets[p].remove(b)
        self.disk[b] -= self.size[p]
        self.network[b] -= self.throughput[p]
        hosted = self.hosted[b]
        del hosted[bisect_left(hosted, (self.size[p], self.throughput[p], p))]
        if b not in self.original[p]:
            self.moved -= self.size[p]

    def cost(self, p: int, b: int) -> int:
        """Bytes a replica of p on broker b adds to the copy: none where p was before."""
        return 0 if b in self.original[p] else self.size[p]

    def utilization(self, b: int, disk: int = 0, network: int = 0) -> float:
        """Broker b's utilisation (its more loaded dimension) with `disk` and `network` more."""
        problem = self.problem
        return max(
            (self.disk[b] + disk) / problem.brokers[b].disk, (self.network[b] + network) / problem.network_full[b]
        )

    def affordable(self, extra: int) -> bool:
        return self.budget is None or self.moved + extra <= self.budget

    def targets(self, p: int, leaving: int = GONE) -> list[int]:
        """The brokers a replica of p (the one on `leaving`, if given) may go to: anti-collocation and
        capacities hold."""
        fits, disk, network = self.problem.fits, self.disk, self.network
        return [b for b in range(len(disk)) if self.rack_free(p, b, leaving) and fits(p, b, disk, network)]

    # 1. repair
    def repair(self) -> bool:
        """Every broker within its capacities and every replica placed; False when a replica fits nowhere."""
        for b in range(len(self.disk)):
            self.shed(b)
        self.lifted.sort(key=lambda p: (-self.size[p], -self.throughput[p], p))
        for p in self.lifted:
            size, throughput = self.size[p], self.throughput[p]
            options = self.targets(p)
            if not options:
                return False
            self.add(p, min(options, key=lambda b: (self.cost(p, b), self.utilization(b, size, throughput), b)))
        self.lifted = []
        return True

    def shed(self, b: int) -> None:
        """Lift replicas off broker b until it is within both capacities."""
        problem, hosted = self.problem, self.hosted[b]
        while True:
            disk_excess = self.disk[b] - problem.disk_limit[b]
            network_excess = self.network[b] - problem.network_limit[b]
            if disk_excess <= 0 and network_excess <= 0:
                return
            # the smallest replica that alone clears both excesses: the least bytes for this broker
            start = bisect_left(hosted, (disk_excess, -1, -1)) if disk_excess > 0 else 0
            chosen = next((i for i in range(start, len(hosted)) if hosted[i][1] >= network_excess), None)
            if chosen is None:  # none does: the largest on the dimension most over (its limit may be 0: full)
                if disk_excess / problem.brokers[b].disk >= network_excess / problem.network_full[b]:
                    chosen = len(hosted) - 1
                else:
                    chosen = max(range(len(hosted)), key=lambda i: (hosted[i][1], -i))
            p = hosted[chosen][2]
            self.remove(p, b)
            self.lifted.append(p)

    # 2. balance
    def lower_peak(self) -> None:
        """Moves off the most utilised broker, least bytes first, while one lowers the peak."""
        brokers = range(len(self.disk))
        for _ in range(20 * sum(len(held) for held in self.sets) + len(self.disk)):
            peak = max(brokers, key=lambda b: (self.utilization(b), -b))
            if not self.shift_off(peak) and not self.swap_off(peak):
                return

    def shift_off(self, a: int) -> bool:
        """Move one replica off broker a so that neither a nor its new broker is as utilised as a was."""
        before = self.utilization(a)
        for size, throughput, p in list(self.hosted[a]):  # smallest first
            if self.utilization(a, -size, -throughput) >= before - EPSILON:
                continue  # leaving does not lower a: its other dimension keeps it at the peak
            refund = self.cost(p, a)
            best = None
            for b in self.targets(p, leaving=a):
                after = self.utilization(b, size, throughput)
                extra = self.cost(p, b) - refund
                if after < before - EPSILON and self.affordable(extra):
                    key = (extra, after, b)
                    if best is None or key < best:
                        best = key
            if best is not None:
                self.remove(p, a)
                self.add(p, best[2])
                return True
        return False

    def swap_off(self, a: int) -> bool:
        """When no single move lowers broker a (replicas large against the brokers, or racks that leave one
        target each), swap one of its replicas with a smaller one of a less utilised broker: a loses the
        difference. The least utilised brokers are tried first, a's smallest replicas first."""
        before, problem = self.utilization(a), self.problem
        lighter = sorted((b for b in range(len(self.disk)) if b != a), key=lambda b: (self.utilization(b), b))
        for t in lighter[:SWAP_TARGETS]:
            # a's bytes t may take and stay below (whole: sizes are)
            room = math.floor((before - self.utilization(t)) * problem.brokers[t].disk)
            hosted = self.hosted[t]
            for size, throughput, p in self.hosted[a][:SWAP_CANDIDATES]:
                # t's replicas smaller than p by less than `room`, the largest difference first
                low = bisect_left(hosted, (size - room, -1, -1))
                high = min(bisect_left(hosted, (size, -1, -1)), low + SWAP_CANDIDATES)
                for other_size, other_throughput, q in hosted[low:high]:
                    if p == q or not self.swappable(p, a, q, t):
                        continue
                    shift, flow = size - other_size, throughput - other_throughput
                    after = max(self.utilization(a, -shift, -flow), self.utilization(t, shift, flow))
                    extra = self.cost(p, t) + self.cost(q, a) - self.cost(p, a) - self.cost(q, t)
                    if after < before - SWAP_GAIN and self.affordable(extra):
                        self.remove(p, a)
                        self.remove(q, t)
                        self.add(p, t)
                        self.add(q, a)
                        return True
        return False

    def swappable(self, p: int, a: int, q: int, t: int) -> bool:
        """Whether p may go from a to t while q goes from t to a: anti-collocation, and both within capacity."""
        if not (self.rack_free(p, t, leaving=a) and self.rack_free(q, a, leaving=t)):
            return False
        problem, size, throughput = self.problem, self.size, self.throughput
        shift, flow = size[p] - size[q], throughput[p] - throughput[q]
        return (
            self.disk[t] + shift <= problem.disk_limit[t]
            and self.network[t] + flow <= problem.network_limit[t]
            and self.network[a] - flow <= problem.network_limit[a]
        )

    # 3. fewest brokers
    def empty_brokers(self) -> None:
        """Empty the least utilised brokers into the others while every replica of one fits elsewhere."""
        closed: set[int] = set()
        progress = True
        while progress:
            progress = False
            used = [b for b in range(len(self.disk)) if self.hosted[b] and b not in closed]
            for b in sorted(used, key=lambda b: (self.utilization(b), b)):
                if self.empty(b, closed):
                    closed.add(b)
                    progress = True
                    break

    def empty(self, b: int, closed: set[int]) -> bool:
        done: list[tuple[int, int]] = []
        for _, _, p in reversed(list(self.hosted[b])):  # largest first
            size, throughput = self.size[p], self.throughput[p]
            options = [t for t in self.targets(p, leaving=b) if t not in closed and self.hosted[t]]
            extra_of = {t: self.cost(p, t) - self.cost(p, b) for t in options}
            options = [t for t in options if self.affordable(extra_of[t])]
            if not options:
                for q, t in reversed(done):  # undo
                    self.remove(q, t)
                    self.add(q, b)
                return False
            target = min(options, key=lambda t: (extra_of[t], -self.utilization(t, size, throughput), t))
            self.remove(p, b)
            self.add(p, target)
            done.append((p, target))
        return True


def greedy(problem: PlacementProblem, keep_current: bool = True) -> Greedy | None:
    """The repaired (and, by objective, improved) placement; None when the repair places some replica nowhere.
    `keep_current=False` places every replica afresh (the baseline that ignores the current placement)."""
    state = Greedy(problem, keep_current)
    if not state.repair():
        return None
    objective = problem.options.objective
    if objective is Objective.BALANCE:
        state.lower_peak()
    elif objective is Objective.BROKERS:
        state.empty_brokers()
    return state


def solve(problem: PlacementProblem) -> Solution:
    state = greedy(problem)
    if state is None:
        raise AssignmentError(
            ErrorCode.PLACEMENT_INFEASIBLE,
            "the heuristic found no broker for some replica within the capacities and the rack rules (bins can "
            "pack badly); try solver 'exact', or add capacity.",
        )
    budget = problem.options.max_bytes_moved
    if budget is not None and state.moved > budget:
        raise AssignmentError(
            ErrorCode.PLACEMENT_INFEASIBLE,
            f"the heuristic's repair copies {state.moved:g} bytes, above max_bytes_moved ({budget:g}); raise "
            "max_bytes_moved, or try solver 'exact'.",
            {"bytes_moved": state.moved, "max_bytes_moved": budget},
        )
    return Solution([sorted(held) for held in state.sets], optimal=False, bounds=lower_bounds(problem))


register(
    Solver(
        name="heuristic",
        description="greedy repair of overloaded brokers and rack violations, then moves and swaps that lower the "
        "peak, least bytes first (seed 003's Basic Model)",
        solve=solve,
    )
)
