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

Zone-aware requests (`Problem.zones`): the objective is W·consumers + Z·cross-zone rate / C + Rscore
(`zone_weight` Z); the placement of step 2 takes a consumer of the partition's racks first (Best Fit among
them, else a new one there), and each pass of the search also brings partitions read across zones into their
zone (`SearchState.localize`). The search state and its steps are app/core/algorithms/search.py's.

Budget (`max_rscore`, `max_moves`): the Rscore and moves of the answer never exceed the caps (except for
the partitions of consumers that are gone, which must move and are charged first). Repairs are paid first,
consumers in id order; the search spends what is left, only on steps that lower the objective. A consumer
the budget cannot repair stays above capacity: `outputs.overloaded_consumers`, with `outputs.rscore_needed`,
the Rscore their cheapest repairs would have cost.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.budget import MigrationBudget, Spending
from app.core.algorithms.search import SearchState
from app.core.model import Problem, sorted_consumers, within

WORK_PER_MS = 700
"""Units of search work per millisecond of `time_limit_ms`: what one core of this project's machine does in
a millisecond of CPU time (690-950 measured at 200, 2 000 and 20 000 partitions; the lowest, so the search
takes about `time_limit_ms` of CPU at most). The limit is kept in units, never in seconds, so answers do not
depend on the machine or its load."""
DEFAULT_CONSUMER_WEIGHT = 1.0
"""W = 1 (a consumer weighs as much as migrating C of rate), chosen with bench/frontier.py: of W ∈ {0.5, 1,
1.5, 3}, the largest that keeps the Rscore within 0.8 × MWF's on three of the four 32- and 200-partition
streams; W = 1.5 or 3 buys 0.5-1.5 % fewer consumers for 8-20 % more Rscore."""
DEFAULT_ZONE_WEIGHT = 2.0
"""Z = 2: a partition read across zones costs twice its move, so moving one into its zone pays (Z > 1), and a
consumer (W = 1) is closed when what it sends across zones is below a third of C."""


class RepackParams(MigrationBudget):
    consumer_weight: float = Field(
        DEFAULT_CONSUMER_WEIGHT,
        gt=0,
        description="W: one consumer more costs as much as migrating W·C of rate (objective W·consumers + Rscore)",
    )
    zone_weight: float = Field(
        DEFAULT_ZONE_WEIGHT,
        ge=0,
        description="Z, for a zone-aware request: reading a rate r across zones costs as much as migrating Z·r once "
        "(objective W·consumers + Z·cross-zone rate / C + Rscore)",
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


class Repacker(SearchState):
    """repack's search state: the repair and placement it starts from, and its search."""

    def __init__(self, problem: Problem, params: RepackParams) -> None:
        super().__init__(
            problem,
            Spending(problem, params),
            params.consumer_weight,
            params.zone_weight,
            params.neighbourhood,
            params.neighbourhood_nodes,
        )
        self.needed = 0.0  # rate the budget did not let repairs migrate

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
        self.index()
        for b in range(len(self.ids)):
            if len(self.held[b]) > 1 and not within(self.load[b], self.cap[b]):
                unplaced.extend(self.repair(b))
        for j in problem.decreasing(unplaced):
            b = self.place_at(j)
            self.put(b, j)
            if b == self.previous_bin[j]:  # given up by a repair, and back where it was: not a move
                self.spending.rate -= rates[j]
                self.spending.moves -= 1

    def place_at(self, j: int) -> int:
        """Best Fit (the least remaining capacity that fits), else a new consumer h(j,k) (Eq. 14). Zone mode:
        Best Fit among the consumers of j's racks, else a new consumer there, first."""
        if self.zones is not None:
            b = self.best_fit_local(j)
            if b < 0:
                b = self.open_local(j)
            if b >= 0:
                return b
        b = self.best_fit(self.rates[j])
        return b if b >= 0 else self.open(self.problem.previous_owner[j])

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
            if self.zones is not None:
                localized = self.localize(limit)
                kept += localized
                improved = improved or localized > 0
            if not improved:
                return {"work": self.work, "kept_steps": kept, "passes": passes, "stopped": "local_optimum"}


def pack(problem: Problem, params: RepackParams) -> Packing:
    state = Repacker(problem, params)
    state.start()
    state.rerack()
    limit = params.time_limit_ms * WORK_PER_MS
    search = state.search(limit)
    objective = params.consumer_weight * sum(1 for held in state.held if held) + state.spending.rate / problem.capacity
    if state.zones is not None:
        objective += params.zone_weight * state.cross / problem.capacity
    return Packing(
        state.assignment(),
        {
            "objective": objective,
            "search": search,
            "budget": state.spending.outputs(),
            "overloaded_consumers": sorted_consumers(state.overloaded()),
            "rscore_needed": state.needed / problem.capacity,
        },
        state.chosen_racks(),
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
