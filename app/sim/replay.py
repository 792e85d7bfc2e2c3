"""Replay a stream through algorithms (§VI-D): consumers and Rscore per iteration, CBS, average Rscore.

Each measurement is solved from the algorithm's own previous assignment, the first from none. Where the
compiled core runs the algorithm (and GROUPFIT_CORE lets it), the whole stream goes through it in one call
(`app.core.native.replay`): the assignment is carried from one measurement to the next inside it, and what
comes back is per measurement, with the owners as arrays. Elsewhere (kd_N, repack, exact, the Kafka baselines,
a stream the compiled core declines) the reference builds each measurement's Problem and solves it; the
differential tests (tests/unit/sim/test_replay_native.py) hold the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core import native
from app.core.algorithm import Algorithm, get_algorithm
from app.core.assign import solve
from app.core.model import MAX_CONSUMERS, build_problem, within
from app.sim.latency import LatencyModel, Owners, Segments, segments
from app.sim.stream import Measurement, flatten


@dataclass
class Run:
    """One algorithm over one stream."""

    algorithm: str
    consumers: list[int] = field(default_factory=list)
    rscore: list[float] = field(default_factory=list)
    within_capacity: list[bool] = field(default_factory=list)  # no consumer above C but one alone
    moves: list[int] = field(default_factory=list)  # partitions that changed consumer
    owners: Owners | None = None
    """Each partition's consumer and previous consumer (the latency model's input), when kept."""

    @property
    def avg_consumers(self) -> float:
        return sum(self.consumers) / len(self.consumers) if self.consumers else 0.0

    @property
    def avg_rscore(self) -> float:
        """E(Rscore) of Eq. 29; the first iteration starts from an empty group and counts as 0."""
        return sum(self.rscore) / len(self.rscore) if self.rscore else 0.0

    def latency(self, model: LatencyModel) -> Segments:
        """The latency segments of this run (replayed with `keep`)."""
        if self.owners is None:
            raise ValueError(f"the replay of {self.algorithm} did not keep its owners")
        return segments(self.owners, model)


class Prepared:
    """A stream, and its compiled form once one replay asked for it: replays of one stream through several
    algorithms read the measurements into arrays once."""

    def __init__(self, stream: Sequence[Measurement]) -> None:
        self.stream = stream
        self._compiled: Any = None
        self._read = False

    def compiled(self) -> Any:
        """The stream on the compiled core's arrays, or None (not installed, or the reference must say what is
        wrong with it)."""
        if not self._read:
            self._compiled, self._read = native.stream(list(self.stream)), True
        return self._compiled


def compiled_core() -> bool:
    """Whether replays go through the compiled core: installed, and GROUPFIT_CORE lets it."""
    from app.settings import get_settings

    return native.choose(get_settings().core)


def replay(
    stream: Sequence[Measurement] | Prepared,
    capacity: float,
    algorithm: str,
    params: dict | None = None,
    keep: bool = False,
    compiled: bool | None = None,
) -> Run:
    """Each measurement from this algorithm's own previous assignment, the first from none; `keep`: keep the
    owners (for the latency model); `compiled`: through the compiled core where it runs the algorithm (None:
    as GROUPFIT_CORE says)."""
    spec = get_algorithm(algorithm)
    return replay_with(stream, capacity, spec, spec.parse_params(params), keep, compiled)


def replay_with(
    stream: Sequence[Measurement] | Prepared,
    capacity: float,
    spec: Algorithm,
    parsed: Any,
    keep: bool,
    compiled: bool | None = None,
) -> Run:
    prepared = stream if isinstance(stream, Prepared) else Prepared(stream)
    if compiled is None:
        compiled = compiled_core()
    if compiled and spec.compiled and get_algorithm(spec.name) is spec:
        measurements = prepared.compiled()
        if measurements is not None:
            replayed = native.replay(measurements, spec.name, capacity, parsed, MAX_CONSUMERS, keep)
            if replayed is not None:
                return _run(spec.name, replayed, keep)
    return _reference(prepared.stream, capacity, spec, parsed, keep)


def _run(name: str, replayed: Any, keep: bool) -> Run:
    """A compiled replay's figures, and its owners (arrays over the bytes the core wrote) when kept."""
    owners = None
    if keep:
        import numpy as np

        counts, rates, owner, previous, consumers = replayed.owners()
        was = np.frombuffer(previous, dtype=np.uint32).astype(np.int64)
        was[was == np.iinfo(np.uint32).max] = -1  # a new partition
        owners = Owners(
            np.frombuffer(counts, dtype=np.uint64).astype(np.int64),
            np.frombuffer(rates, dtype=float),
            np.frombuffer(owner, dtype=np.uint32).astype(np.int64),
            was,
            consumers,
        )
    return Run(name, replayed.consumers, replayed.rscore, replayed.within_capacity, replayed.moves, owners)


def _reference(stream: Sequence[Measurement], capacity: float, spec: Algorithm, parsed: Any, keep: bool) -> Run:
    """The reference replay: each measurement's Problem built and solved in Python."""
    run = Run(spec.name)
    previous: dict[str, list[tuple[str, int]]] = {}
    counts: list[int] = []
    rates: list[float] = []
    owner: list[str] = []
    held_by: list[str | None] = []
    for measurement in stream:
        keys, measured = flatten(measurement)
        problem = build_problem(keys, measured, None, capacity, previous)
        outcome = solve(problem, spec, parsed)
        run.consumers.append(outcome.consumer_count)
        run.rscore.append(outcome.rscore)
        run.within_capacity.append(
            all(len(held) == 1 or within(outcome.loads[c], capacity) for c, held in outcome.assignment.items())
        )
        run.moves.append(len(outcome.moved))
        if keep:
            counts.append(problem.size)
            rates.extend(problem.rates)
            owner.extend(outcome.owner)
            held_by.extend(problem.previous_owner)
        previous = {c: [keys[j] for j in held] for c, held in outcome.assignment.items() if held}
    if keep:
        run.owners = Owners.of_names(counts, rates, owner, held_by)
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
