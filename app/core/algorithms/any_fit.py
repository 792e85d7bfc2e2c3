"""The Any Fit heuristics adapted to consumer groups (Landau et al. 2024, §II-B and §VI-A).

NF, FF, BF, WF take the partitions in request order; NFD, FFD, BFD, WFD in decreasing rate order
(ties by (topic, partition)). When no open bin takes partition j, the new bin is h(j,k) (Eq. 14):
j's previous consumer if it is not open yet, else the lowest unused consumer f(k) (Eq. 12). Next Fit's
first consumer is open before any partition comes, so it is f(k), as in the published implementation.
"""

from __future__ import annotations

from app.core.algorithm import Algorithm, NoParams, Packing, register
from app.core.bins import FIT_RULES
from app.core.model import Problem

_RULE_NAMES = {"next": "Next Fit", "first": "First Fit", "best": "Best Fit", "worst": "Worst Fit"}


def any_fit(problem: Problem, fit: str, decreasing: bool) -> Packing:
    bins = FIT_RULES[fit](problem)
    order = problem.decreasing() if decreasing else range(problem.size)
    for j in order:
        bins.place(j)
    return Packing(bins.assignment())


def _register(fit: str, decreasing: bool, paper: int) -> None:
    name = fit[0] + "f" + ("d" if decreasing else "")
    title = _RULE_NAMES[fit] + (" Decreasing" if decreasing else "")
    order = "largest rate first" if decreasing else "in request order"
    register(
        Algorithm(
            name=name,
            description=f"{title}: partitions {order}, new consumers by h(j,k) (Landau et al. §VI-A).",
            pack=lambda problem, _params: any_fit(problem, fit, decreasing),
            params=NoParams,
            source="Landau et al. 2024, §II-B, §VI-A, Eq. 12-14",
            paper=paper,
            cheap=True,
        )
    )


for _rank, _fit in enumerate(_RULE_NAMES):
    for _decreasing in (False, True):
        # the paper's first eight (§VI-A): NF, FF, BF, WF, then the same decreasing
        _register(_fit, _decreasing, paper=1 + _rank + 4 * _decreasing)
