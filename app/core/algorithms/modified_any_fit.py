"""Modified Any Fit: MWF, MBF, MWFP, MBFP (Landau et al. 2024, Algorithm 1 and Table II).

The previous consumers are visited largest first (by cumulative rate, or by their largest
partition). Each one's partitions try, smallest first, to migrate into consumers already open; at
the first that fits nowhere, the consumer itself is opened and keeps the rest, largest first, until
one does not fit; that one and all after it join the unassigned set, which finally goes through the
fit rule largest first, new consumers by h(j,k).

With a migration budget (`max_rscore`, `max_moves`), a move is made only while the budget affords it:
the migration of lines 6-13 stops at the first partition it cannot afford (the consumer is then opened
with what it holds), and a partition of the unassigned set that the fit rule would move but the budget
cannot pay for stays on its consumer, above capacity if need be: `outputs.overloaded_consumers`. Moves
are charged in the order the algorithm makes them, so the budget goes to the consumers visited first.
Partitions of a consumer that is gone must move and are charged even beyond the budget.
"""

from __future__ import annotations

from functools import partial

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.budget import MigrationBudget, Spending
from app.core.bins import FIT_RULES
from app.core.model import Problem, consumer_sort_key, sorted_consumers, within


def modified_any_fit(problem: Problem, fit: str, sort: str, budget: MigrationBudget | None = None) -> Packing:
    rates = problem.rates
    spending = Spending(problem, budget or MigrationBudget())
    bins = FIT_RULES[fit](problem)  # line 1: N ← new ConsumerList with assignStrategy
    home: dict[str, int] = {}  # previous consumer → its bin, once opened under its own id
    unassigned: list[int] = []  # U: partitions no consumer held (new ones)
    psets: dict[str, list[int]] = {}  # line 5 for every consumer at once: its partitions, largest first
    previous_owner = problem.previous_owner
    for j in problem.decreasing_order:
        owner = previous_owner[j]
        if owner is None:
            unassigned.append(j)
        else:
            psets.setdefault(owner, []).append(j)
    if sort == "cumulative":  # line 2: sort C with sortStrategy, largest first, ties by id
        size = {c: sum(map(rates.__getitem__, pset)) for c, pset in psets.items()}
    else:
        size = {c: rates[pset[0]] for c, pset in psets.items()}
    consumers = sorted(psets, key=consumer_sort_key)
    consumers.sort(key=size.__getitem__, reverse=True)
    for consumer in consumers:  # line 3
        pset = psets[consumer]
        stays = bins.pool.allowed(consumer)  # a consumer that is gone cannot keep anything
        # lines 6-13: smallest first into open bins, while the budget affords the move
        while pset and (spending.affords(pset[-1]) or not stays) and bins.place_open(pset[-1]):
            spending.spend(pset.pop())
        if not pset:  # lines 14-16
            continue
        own = bins.open(consumer)  # line 17: createConsumer(c)
        rest = bins.fill(own, pset)  # lines 18-25: largest first; the rest join U
        if stays:
            home[consumer] = own
        else:  # opened under another id: what it kept moved too
            for j in pset[: len(pset) - len(rest)]:
                spending.spend(j)
        unassigned.extend(rest)
    for j in problem.decreasing(unassigned):  # lines 27-30
        b = bins.find(j)
        was = previous_owner[j]
        stay = home.get(was) if was is not None else None
        if stay is None or b == stay:
            b = bins.place(j)
            if was is not None and bins.ids[b] != was:
                spending.spend(j)
        elif spending.affords(j):
            bins.place(j)
            spending.spend(j)
        else:  # the budget is spent: j stays where it is
            spending.refuse()
            bins.put(stay, j)
    outputs = {}
    if spending.limited:
        over = [
            consumer
            for b, consumer in enumerate(bins.ids)
            if len(bins.held[b]) > 1 and not within(bins.load[b], bins.cap[b])
        ]
        outputs = {"budget": spending.outputs(), "overloaded_consumers": sorted_consumers(over)}
    return Packing(bins.assignment(), outputs)


def _pack(problem: Problem, params: MigrationBudget, fit: str, sort: str) -> Packing:
    return modified_any_fit(problem, fit, sort, params)


_TABLE_II = {
    "mwf": ("worst", "cumulative", "Modified Worst Fit: consumers by cumulative rate"),
    "mbf": ("best", "cumulative", "Modified Best Fit: consumers by cumulative rate"),
    "mwfp": ("worst", "max", "Modified Worst Fit Partition: consumers by their largest partition"),
    "mbfp": ("best", "max", "Modified Best Fit Partition: consumers by their largest partition"),
}

for _paper, (_name, (_fit, _sort, _title)) in enumerate(_TABLE_II.items(), start=9):  # the paper's last four
    register(
        Algorithm(
            name=_name,
            description=f"{_title}; migrates small partitions, keeps large ones (Landau et al. Algorithm 1).",
            pack=partial(_pack, fit=_fit, sort=_sort),
            params=MigrationBudget,
            source="Landau et al. 2024, §IV-B, Algorithm 1, Table II",
            paper=_paper,
            cheap=True,
        )
    )
