"""Replay a stream through algorithms (§VI-D): consumers and Rscore per iteration, CBS, average Rscore."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.core.algorithm import Algorithm, get_algorithm
from app.core.assign import Outcome, solve
from app.core.model import build_problem, within
from app.sim.stream import Measurement, flatten


@dataclass
class Run:
    """One algorithm over one stream."""

    algorithm: str
    consumers: list[int] = field(default_factory=list)
    rscore: list[float] = field(default_factory=list)
    within_capacity: list[bool] = field(default_factory=list)  # no consumer above C but one alone
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def avg_consumers(self) -> float:
        return sum(self.consumers) / len(self.consumers) if self.consumers else 0.0

    @property
    def avg_rscore(self) -> float:
        """E(Rscore) of Eq. 29; the first iteration starts from an empty group and counts as 0."""
        return sum(self.rscore) / len(self.rscore) if self.rscore else 0.0


def replay(
    stream: Sequence[Measurement], capacity: float, algorithm: str, params: dict | None = None, keep: bool = False
) -> Run:
    """Each measurement from this algorithm's own previous assignment, the first from none."""
    spec = get_algorithm(algorithm)
    return replay_with(stream, capacity, spec, spec.parse_params(params), keep)


def replay_with(stream: Sequence[Measurement], capacity: float, spec: Algorithm, parsed: object, keep: bool) -> Run:
    run = Run(spec.name)
    previous: dict[str, list[tuple[str, int]]] = {}
    for measurement in stream:
        keys, rates = flatten(measurement)
        problem = build_problem(keys, rates, None, capacity, previous)
        outcome = solve(problem, spec, parsed)
        run.consumers.append(outcome.consumer_count)
        run.rscore.append(outcome.rscore)
        run.within_capacity.append(
            all(len(held) == 1 or within(outcome.loads[c], capacity) for c, held in outcome.assignment.items())
        )
        if keep:
            run.outcomes.append(outcome)
        previous = {c: [keys[j] for j in held] for c, held in outcome.assignment.items() if held}
    return run


def cbs(runs: Sequence[Run]) -> dict[str, float]:
    """Cardinal Bin Score, Eq. 28: mean relative excess over the fewest consumers per iteration. The
    fewest are taken among the runs that kept every consumer within C at that iteration (an assignment
    that ignores rates, like kd_N, may use fewer consumers by overloading them); among all runs if none did."""
    if not runs:
        return {}
    iterations = len(runs[0].consumers)
    best = []
    for i in range(iterations):
        feasible = [run.consumers[i] for run in runs if run.within_capacity[i]]
        best.append(min(feasible or [run.consumers[i] for run in runs]))
    return {
        run.algorithm: sum((z - b) / b for z, b in zip(run.consumers, best) if b) / iterations if iterations else 0.0
        for run in runs
    }
