"""Modified Any Fit: MWF, MBF, MWFP, MBFP (Landau et al. 2024, Algorithm 1 and Table II).

The previous consumers are visited largest first (by cumulative rate, or by their largest
partition). Each one's partitions try, smallest first, to migrate into consumers already open; at
the first that fits nowhere, the consumer itself is opened and keeps the rest, largest first, until
one does not fit; that one and all after it join the unassigned set, which finally goes through the
fit rule largest first, new consumers by h(j,k).
"""

from __future__ import annotations

from app.core.algorithm import Algorithm, NoParams, Placement, register
from app.core.bins import FIT_RULES
from app.core.model import Problem, consumer_sort_key


def modified_any_fit(problem: Problem, fit: str, sort: str) -> Placement:
    rates = problem.rates
    bins = FIT_RULES[fit](problem)  # line 1: N ← new ConsumerList with assignStrategy
    unassigned = [j for j, owner in enumerate(problem.previous_owner) if owner is None]
    consumer_size = {  # line 2: cumulative sort or max partition sort
        "cumulative": lambda held: sum(rates[j] for j in held),
        "max": lambda held: max(rates[j] for j in held),
    }[sort]
    consumers = [(c, held) for c, held in problem.previous_indices.items() if held]
    consumers.sort(key=lambda item: consumer_sort_key(item[0]))
    consumers.sort(key=lambda item: consumer_size(item[1]), reverse=True)
    for consumer, held in consumers:  # line 3
        pset = problem.decreasing(held)  # line 5
        while pset and bins.place_open(pset[-1]):  # lines 6-13: smallest first into open bins
            pset.pop()
        if not pset:  # lines 14-16
            continue
        own = bins.open(consumer)  # line 17: createConsumer(c)
        for i, j in enumerate(pset):  # lines 18-24: largest first into its own consumer
            if not bins.fits(own, j):
                unassigned.extend(pset[i:])  # line 25
                break
            bins.put(own, j)
    for j in problem.decreasing(unassigned):  # lines 27-30
        bins.place(j)
    return Placement(bins.assignment())


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
            place=lambda problem, _params, fit=_fit, sort=_sort: modified_any_fit(problem, fit, sort),
            params=NoParams,
            source="Landau et al. 2024, §IV-B, Algorithm 1, Table II",
        )
    )
