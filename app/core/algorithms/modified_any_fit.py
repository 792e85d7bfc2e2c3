"""Modified Any Fit: MWF, MBF, MWFP, MBFP (Landau et al. 2024, Algorithm 1 and Table II).

The previous consumers are visited largest first (by cumulative rate, or by their largest
partition). Each one's partitions try, smallest first, to migrate into consumers already open; at
the first that fits nowhere, the consumer itself is opened and keeps the rest, largest first, until
one does not fit; that one and all after it join the unassigned set, which finally goes through the
fit rule largest first, new consumers by h(j,k).
"""

from __future__ import annotations

from functools import partial

from app.core.algorithm import Algorithm, NoParams, Placement, register
from app.core.bins import FIT_RULES
from app.core.model import Problem, consumer_sort_key


def modified_any_fit(problem: Problem, fit: str, sort: str) -> Placement:
    rates = problem.rates
    bins = FIT_RULES[fit](problem)  # line 1: N ← new ConsumerList with assignStrategy
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
        while pset and bins.place_open(pset[-1]):  # lines 6-13: smallest first into open bins
            pset.pop()
        if not pset:  # lines 14-16
            continue
        own = bins.open(consumer)  # line 17: createConsumer(c)
        unassigned.extend(bins.fill(own, pset))  # lines 18-25: largest first; the rest join U
    for j in problem.decreasing(unassigned):  # lines 27-30
        bins.place(j)
    return Placement(bins.assignment())


def _place(problem: Problem, _params: NoParams, fit: str, sort: str) -> Placement:
    return modified_any_fit(problem, fit, sort)


_TABLE_II = {
    "mwf": ("worst", "cumulative", "Modified Worst Fit: consumers by cumulative rate"),
    "mbf": ("best", "cumulative", "Modified Best Fit: consumers by cumulative rate"),
    "mwfp": ("worst", "max", "Modified Worst Fit Partition: consumers by their largest partition"),
    "mbfp": ("best", "max", "Modified Best Fit Partition: consumers by their largest partition"),
}

for _name, (_fit, _sort, _title) in _TABLE_II.items():
    register(
        Algorithm(
            name=_name,
            description=f"{_title}; migrates small partitions, keeps large ones (Landau et al. Algorithm 1).",
            place=partial(_place, fit=_fit, sort=_sort),
            params=NoParams,
            source="Landau et al. 2024, §IV-B, Algorithm 1, Table II",
        )
    )
