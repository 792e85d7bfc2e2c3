"""repack: a migration-aware assignment, W·consumers + Rscore (Landau et al. Eq. 3 and Eq. 11 in one
objective), from the previous assignment by large-neighbourhood search.

1. Repair: every previous consumer keeps its partitions; one above its capacity gives up the cheapest set
   of partitions that brings it within (the smallest single partition that suffices, or the smallest ones
   until it fits, whichever migrates less rate and the budget affords). Each consumer has its own capacity
   (`Problem.capacity_of`; members of different sizes).
2. Place what has no consumer (new partitions, those given up, those of consumers that are gone), largest
   first, by Best Fit (the least remaining capacity that fits), else on a new consumer h(j,k) (Eq. 14).
3. Search, in passes over the open consumers, least utilised first (ties by id):
   a. dissolve: close the target if each of its partitions, largest first, finds another consumer — its
      previous one if it fits, else Best Fit, else by ejecting a smaller partition from one of the
      EJECTION_TRIES consumers with the most room into Best Fit elsewhere (a chain of length two) — and
      that lowers the objective (W·C above the rate it migrates) within the budget;
   b. re-solve: the target and the k − 1 consumers with the most remaining capacity; their partitions are
      re-placed among them exactly (depth-first branch and bound, largest partition first, at most
      `neighbourhood_nodes` nodes) for the least W·(consumers used) + (rate away from its previous
      consumer)/C; a strictly better placement is kept.
   Passes repeat until one keeps nothing (a local optimum) or the work limit is reached. Neither step needs
   a solver (no OR-Tools).

Determinism: the work limit counts search work (branch-and-bound nodes, partitions moved, relocated or
examined for ejection, consumers ranked; `time_limit_ms` × WORK_PER_MS), not wall-clock time, so the same
input gives the same answer on any machine. The repair and placement before the search are not counted: they
take time linear in the partitions (plus a sort).

Budget (`max_rscore`, `max_moves`): the Rscore and moves of the answer never exceed the caps (except for
the partitions of consumers that are gone, which must move and are charged first). Repairs are paid first,
consumers in id order; the search spends what is left, only on steps that lower the objective. A consumer
the budget cannot repair stays above capacity: `outputs.overloaded_consumers`, with `outputs.rscore_needed`,
the Rscore their cheapest repairs would have cost.
"""

from __future__ import annotations

import itertools
from typing import Any

from pydantic import Field

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.budget import MigrationBudget, Spending
from app.core.bins import ConsumerPool, SortedRuns
from app.core.model import ROUNDING, ROUNDING_ERROR, Problem, consumer_sort_key, sorted_consumers, within

WORK_PER_MS = 700
"""Units of search work per millisecond of `time_limit_ms`: what one core of this project's machine does in
a millisecond of CPU time (690-950 measured at 200, 2 000 and 20 000 partitions; the lowest, so the search
takes about `time_limit_ms` of CPU at most). The limit is kept in units, never in seconds, so answers do not
depend on the machine or its load."""
EJECTION_TRIES = 32
"""Consumers (those with the most room) a partition that fits nowhere may eject a smaller one from."""
DEFAULT_CONSUMER_WEIGHT = 1.0
"""W = 1 (a consumer weighs as much as migrating C of rate), chosen with bench/frontier.py: of W ∈ {0.5, 1,
1.5, 3}, the largest that keeps the Rscore within 0.8 × MWF's on three of the four 32- and 200-partition
streams; W = 1.5 or 3 buys 0.5-1.5 % fewer consumers for 8-20 % more Rscore."""


class RepackParams(MigrationBudget):
    consumer_weight: float = Field(
        DEFAULT_CONSUMER_WEIGHT,
        gt=0,
        description="W: one consumer more costs as much as migrating W·C of rate (objective W·consumers + Rscore)",
    )
    time_limit_ms: int = Field(
        200,
        ge=1,
        le=60_000,
        description=f"search budget: {WORK_PER_MS} units of search work per ms, counted, never timed (deterministic)",
    )
    neighbourhood: int = Field(4, ge=2, le=8, description="consumers re-placed together in one search step")
    neighbourhood_nodes: int = Field(
        1_000,
        ge=1,
        le=1_000_000,
        description="branch-and-bound nodes one neighbourhood may take; past them it keeps the best placement found",
    )


class Repacker:
    """The assignment under search: consumers (bins) with their partitions, loads and capacities."""

    def __init__(self, problem: Problem, params: RepackParams) -> None:
        self.problem = problem
        self.rates = problem.rates
        self.weight = params.consumer_weight
        self.k = params.neighbourhood
        self.nodes = params.neighbourhood_nodes
        self.spending = Spending(problem, params)
        self.pool = ConsumerPool(problem.members, problem.capacity_of)
        self.ids: list[str] = []
        self.cap: list[float] = []
        self.held: list[list[int]] = []
        self.load: list[float] = []
        self.bin_of: dict[str, int] = {}
        self.owner: list[int] = [-1] * problem.size  # partition → its bin
        self.previous_bin: list[int] = [-1] * problem.size  # partition → its previous consumer's bin, if open
        self.needed = 0.0  # rate the budget did not let repairs migrate
        self.work = 0  # search work done, in the units of WORK_PER_MS
        self.by_slack = SortedRuns()  # non-empty consumers by (−remaining capacity, id, bin)
        self.slack_entry: dict[int, tuple] = {}

    # -- the state ---------------------------------------------------------------------------------------

    def open(self, preferred: str | None = None) -> int:
        consumer = self.pool.open(preferred)
        b = len(self.ids)
        self.ids.append(consumer)
        self.cap.append(self.problem.capacity_of(consumer))
        self.held.append([])
        self.load.append(0.0)
        self.bin_of[consumer] = b
        return b

    def put(self, b: int, j: int) -> None:
        self.held[b].append(j)
        self.load[b] += self.rates[j]
        self.owner[j] = b
        self.track(b)

    def take(self, b: int, j: int) -> None:
        self.held[b].remove(j)
        self.load[b] -= self.rates[j]
        self.owner[j] = -1
        self.track(b)

    def track(self, b: int) -> None:
        old = self.slack_entry.pop(b, None)
        if old is not None:
            self.by_slack.remove(old)
        if self.held[b]:
            entry = self.slack_entry[b] = (self.load[b] - self.cap[b], consumer_sort_key(self.ids[b]), b)
            self.by_slack.add(entry)

    def fits(self, b: int, j: int) -> bool:
        """An empty consumer takes anything; otherwise within its capacity."""
        return not self.held[b] or within(self.load[b] + self.rates[j], self.cap[b])

    def cost(self, j: int, b: int) -> bool:
        """Whether partition j on bin b is a move (it had another consumer)."""
        return self.problem.previous_owner[j] is not None and self.previous_bin[j] != b

    # -- 1. repair, 2. place -------------------------------------------------------------------------------

    def start(self) -> None:
        problem, rates = self.problem, self.rates
        unplaced: list[int] = [j for j, owner in enumerate(problem.previous_owner) if owner is None]
        for consumer in sorted_consumers(problem.previous_indices):
            held = problem.previous_indices[consumer]
            if not held:
                continue
            if not self.pool.allowed(consumer):  # gone: its partitions must move
                for j in held:
                    self.spending.spend(j)
                unplaced.extend(held)
                continue
            b = self.open(consumer)
            self.held[b] = list(held)
            self.load[b] = sum(rates[j] for j in held)
            for j in held:
                self.owner[j] = self.previous_bin[j] = b
        entries = [(self.load[b] - self.cap[b], consumer_sort_key(self.ids[b]), b) for b in range(len(self.ids))]
        self.by_slack = SortedRuns.of(entries)  # at once: faster than one insert per consumer
        self.slack_entry = {entry[2]: entry for entry in entries}
        for b in range(len(self.ids)):
            if len(self.held[b]) > 1 and not within(self.load[b], self.cap[b]):
                unplaced.extend(self.repair(b))
        for j in problem.decreasing(unplaced):
            b = self.best_fit(rates[j])
            if b < 0:
                b = self.open(problem.previous_owner[j])
            self.put(b, j)
            if b == self.previous_bin[j]:  # given up by a repair, and back where it was: not a move
                self.spending.rate -= rates[j]
                self.spending.moves -= 1

    def repair(self, b: int) -> list[int]:
        """Give up the cheapest partitions that bring bin b within its capacity (the smallest one that
        suffices, or the smallest ones until it fits; the cheaper the budget affords), or none."""
        rates, load, capacity = self.rates, self.load[b], self.cap[b]
        ascending = sorted(self.held[b], key=lambda j: (rates[j], self.problem.keys[j]))
        if not within(rates[ascending[-1]], capacity):  # the largest sits alone: the rest goes
            candidates = [ascending[:-1]]
        else:
            candidates = [[j] for j in ascending if within(load - rates[j], capacity)][:1]
            smallest: list[int] = []
            for j in ascending:
                if within(load, capacity):
                    break
                smallest.append(j)
                load -= rates[j]
            candidates.append(smallest)
        candidates.sort(key=lambda chosen: (sum(rates[j] for j in chosen), len(chosen)))
        given = next((chosen for chosen in candidates if self.affordable(chosen)), None)
        if given is None:  # stays above capacity: what its cheapest repair would have cost
            self.needed += sum(rates[j] for j in candidates[0])
            for _ in candidates[0]:
                self.spending.refuse()
            return []
        for j in given:
            self.spending.spend(j)
            self.take(b, j)
        return given

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

    # -- 3. search -------------------------------------------------------------------------------------------

    def search(self, limit: int) -> dict[str, Any]:
        """Passes over the targets until one keeps nothing or `limit` units of work are spent: each pass
        first tries to dissolve every target (cheap), then re-solves the neighbourhood of each. Returns
        what `outputs.search` reports: work done, steps kept, passes, why it stopped."""
        kept, passes = 0, 0
        while True:
            passes += 1
            improved = False
            for step in (self.dissolve, self.resolve):
                for target in self.targets():
                    if not self.held[target]:
                        continue
                    if self.work >= limit:
                        return {"work": self.work, "kept_steps": kept, "passes": passes, "stopped": "work_limit"}
                    if step(target, limit):
                        kept += 1
                        improved = True
            if not improved:
                return {"work": self.work, "kept_steps": kept, "passes": passes, "stopped": "local_optimum"}

    def targets(self) -> list[int]:
        """Open consumers, least utilised first, ties by id (one unit of work each)."""
        self.work += len(self.ids)
        return sorted(
            (b for b in range(len(self.ids)) if self.held[b]),
            key=lambda b: (self.load[b] / self.cap[b], consumer_sort_key(self.ids[b])),
        )

    def resolve(self, target: int, limit: int) -> bool:
        spent, better = Neighbourhood(self, self.neighbourhood(target)).solve(min(self.nodes, limit - self.work))
        self.work += spent
        if better is None:
            return False
        for j, b in better.items():
            if self.owner[j] != b:
                self.move(j, b)
        return True

    def dissolve(self, target: int, _limit: int) -> bool:
        """Close the target if each of its partitions, largest first, finds another consumer (`relocate`)
        and that lowers the objective within the budget; else leave everything as it was."""
        rates = self.rates
        items = sorted(self.held[target], key=lambda j: (-rates[j], self.problem.keys[j]))
        before_rate, before_moves = self.spending.rate, self.spending.moves
        journal: list[tuple[int, int]] = []  # (partition, the bin it was in), to undo
        for j in items:
            journal.append((j, target))
            self.move(j, -1)
        closed = all(self.relocate(j, target, journal) for j in items)
        gain = self.weight * self.problem.capacity - (self.spending.rate - before_rate)
        if closed and gain > 1e-9 and self.spending.within():
            return True
        for j, b in reversed(journal):
            self.move(j, b)
        self.spending.rate, self.spending.moves = before_rate, before_moves  # exactly, without float drift
        return False

    def relocate(self, j: int, target: int, journal: list[tuple[int, int]]) -> bool:
        """Put j (out of every bin) on another open consumer: its previous one if it fits, else Best Fit
        (the least remaining capacity that fits), else by ejecting a smaller partition from one of the
        EJECTION_TRIES consumers with the most room into Best Fit elsewhere."""
        rates = self.rates
        self.work += 1
        home = self.previous_bin[j]
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

    def best_fit(self, rate: float, excluded: int = -1) -> int:
        """The open consumer with the least remaining capacity that takes `rate`, other than `excluded`, or −1.
        The entries are (load − capacity, id, bin): the last one below rate − 0 (up to rounding) fits."""
        found = self.by_slack.last_below((self.problem.capacity * ROUNDING_ERROR - rate,))
        if found is not None and found[2] == excluded:  # the next one down has more room
            found = self.by_slack.last_below(found)
        if found is None:
            return -1
        b = found[2]
        return b if within(self.load[b] + rate, self.cap[b]) else -1

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

    def neighbourhood(self, target: int) -> list[int]:
        """The target and the k − 1 other open consumers with the most remaining capacity (ties by id)."""
        chosen = [target]
        for _, _, b in self.by_slack:
            if len(chosen) == self.k:
                break
            if b != target:
                chosen.append(b)
        return chosen

    def assignment(self) -> dict[str, list[int]]:
        keys = self.problem.keys
        return {self.ids[b]: sorted(held, key=keys.__getitem__) for b, held in enumerate(self.held) if held}


class Neighbourhood:
    """The partitions of a few consumers, re-placed among them for the least W·used + moved rate / C."""

    def __init__(self, state: Repacker, bins: list[int]) -> None:
        self.state = state
        self.bins = bins
        rates = state.rates
        self.items = sorted((j for b in bins for j in state.held[b]), key=lambda j: (-rates[j], state.problem.keys[j]))
        capacity = state.problem.capacity
        k = len(bins)
        # The cost of j on each bin of the neighbourhood, in units of C (0 where it stays or was new).
        self.moves = [[state.cost(j, b) for b in bins] for j in self.items]
        self.costs = [[rates[j] / capacity if move else 0.0 for move in row] for j, row in zip(self.items, self.moves)]
        self.caps = [state.cap[b] * ROUNDING for b in bins]
        # Each partition tries the consumers it costs least on first (ties: the target, then by slack).
        self.order = [
            sorted(range(k), key=list(zip(cost, move)).__getitem__) for cost, move in zip(self.costs, self.moves)
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
                while i > 0 and self.moves[i - 1][a] == self.moves[i - 1][b]:
                    i -= 1
                self.equal_from[a][b] = self.equal_from[b][a] = i
        self.weight = state.weight
        current = [bins.index(state.owner[j]) for j in self.items]
        used = len(set(current))
        moved = sum(self.costs[i][slot] for i, slot in enumerate(current))
        self.best_value = self.weight * used + moved - 1e-9  # only strictly better placements are kept
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
        items, costs, moves_of, caps, order, equal_from, suffix = (
            self.items,
            self.costs,
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

        def dfs(i: int, used: int, used_cap: float, moved: float, moves: int) -> None:
            nonlocal nodes
            nodes += 1
            if i == n:
                if weight * used + moved < self.best_value:
                    self.best_value = weight * used + moved
                    self.best = chosen.copy()
                return
            # Lower bound: the rest needs a consumer more unless the used ones have room for all of it.
            extra = 0 if suffix[i] <= used_cap - (total - suffix[i]) else 1
            if weight * (used + extra) + moved >= self.best_value or nodes > limit:
                return
            rate, row, is_move = rates[items[i]], costs[i], moves_of[i]
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
                    dfs(i + 1, used + 1, used_cap + caps[slot], moved + step, moves + move)
                else:
                    dfs(i + 1, used, used_cap, moved + step, moves + move)
                load[slot] -= rate
                count[slot] -= 1

        dfs(0, 0, 0.0, 0.0, 0)
        if self.best is None:
            return nodes, None
        return nodes, {j: self.bins[slot] for j, slot in zip(items, self.best)}


def pack(problem: Problem, params: RepackParams) -> Packing:
    state = Repacker(problem, params)
    state.start()
    limit = params.time_limit_ms * WORK_PER_MS
    search = state.search(limit)
    over = [
        state.ids[b] for b, held in enumerate(state.held) if len(held) > 1 and not within(state.load[b], state.cap[b])
    ]
    return Packing(
        state.assignment(),
        {
            "objective": params.consumer_weight * sum(1 for held in state.held if held)
            + state.spending.rate / problem.capacity,
            "search": search,
            "budget": state.spending.outputs(),
            "overloaded_consumers": sorted_consumers(over),
            "rscore_needed": state.needed / problem.capacity,
        },
    )


register(
    Algorithm(
        name="repack",
        description="Migration-aware repacking: W·consumers + Rscore from the previous assignment (repair, place, "
        "large-neighbourhood search); max_rscore / max_moves caps.",
        pack=pack,
        params=RepackParams,
        source="Landau et al. 2024, Eq. 3 and 11 as one objective; large-neighbourhood search (Shaw 1998)",
    )
)
