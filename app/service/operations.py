"""What an operator asks of the stored groups: the listing, a group's rates history replayed through
algorithms (the paper's evaluation, §VI, on the group's own traffic), and the consumer count it needs now."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import msgspec

from app.codec.evaluate import LatencyFigures, Measurement
from app.codec.operations import (
    GroupList,
    GroupSummary,
    RatesHistory,
    RatesWindow,
    ReplayResponse,
    ReplayRun,
    ScaleQuery,
    ScaleSignal,
)
from app.codec.wire import PartitionRate
from app.core.errors import AssignmentError, ErrorCode, GroupfitError
from app.service.assign import AssignService
from app.service.compute import ComputePool
from app.service.groups import stored_group
from app.service.scaling import scale_signal
from app.settings import Settings
from app.sim.history import cadence
from app.sim.latency import THROUGHPUT_PER_CAPACITY
from app.store.groups import GroupStore, StoreUnavailable

log = logging.getLogger("groupfit")

DEFAULT_SCALE_QUERY = ScaleQuery()


class ScaleObserver(Protocol):
    def scaled(self, group: str, needed: int, current: int, overloaded: int) -> None: ...

    def rates_updated(self, group: str) -> None: ...

    def store_failed(self, reason: str) -> None: ...


def _age_s(stamp: str | None, now: datetime) -> float | None:
    if stamp is None:
        return None
    return max(0.0, (now - datetime.fromisoformat(stamp)).total_seconds())


class OperationsService:
    def __init__(
        self,
        store: GroupStore,
        settings: Settings,
        assigner: AssignService,
        pool: ComputePool,
        observer: ScaleObserver | None = None,
    ) -> None:
        self.store = store
        self.assigner = assigner
        self.pool = pool
        self.max_cells = settings.max_evaluate_cells
        self.observer = observer

    async def groups(self, allowed: frozenset[str] | None, contains: str, limit: int) -> GroupList:
        """Groups whose name contains `contains`, among those the token may read, in name order."""
        names = [
            name for name in await self.store.group_names() if contains in name and (allowed is None or name in allowed)
        ]
        now = datetime.now().astimezone()
        summaries = [
            GroupSummary(
                group=s.group,
                version=s.version,
                algorithm=s.algorithm,
                capacity=s.capacity,
                consumers=s.last["consumer_count"] if s.last else None,
                rscore=s.last["rscore"] if s.last else None,
                updated_at=s.updated_at,
                rates_window_end=s.rates_window_end,
                rates_age_s=_age_s(s.rates_updated_at, now),
                partition_count=s.partition_count,
            )
            for s in await self.store.summaries(names[:limit])
        ]
        return GroupList(summaries, truncated=len(names) > limit)

    async def _windows(self, group: str, limit: int, algorithms: int = 1) -> list[dict]:
        """The newest `limit` windows, refused before they are read when windows × partitions × algorithms
        would exceed GROUPFIT_MAX_EVALUATE_CELLS (the latest window's partition count stands for each)."""
        stored, partitions = await self.store.rates_history_size(group)
        cells = partitions * min(limit, stored) * algorithms
        if cells > self.max_cells:
            fitting = max(1, self.max_cells // max(1, partitions * algorithms))
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"{min(limit, stored)} windows of {partitions} partitions × {algorithms} algorithm(s) exceeds {self.max_cells} "
                f"cells; ask for at most {fitting} windows.",
                {"windows_that_fit": fitting},
            )
        windows = await self.store.rates_history(group, limit)
        if not windows:
            raise AssignmentError(
                ErrorCode.GROUP_NOT_FOUND,
                f"group {group!r} has no stored rates windows; PUT /v1/groups/{group}/rates first.",
            )
        return windows

    async def rates_history(self, group: str, limit: int) -> RatesHistory:
        windows = await self._windows(group, limit)
        return RatesHistory(
            group,
            [
                RatesWindow(w["window_end"], w["updated_at"], [PartitionRate(*p) for p in w["partitions"]])
                for w in windows
            ],
        )

    async def replay(
        self,
        group: str,
        algorithms: Sequence[str],
        limit: int,
        latency: bool,
        consumer_throughput: float | None,
        rebalance_s: float,
    ) -> ReplayResponse:
        """The stored windows, oldest first, replayed through each algorithm from its own previous assignment,
        with the group's capacity. Each window lasts the median time between the stored windows' ends."""
        from app.sim.evaluate import check_names

        check_names(algorithms)
        stored = await self.store.get(group)
        if stored is None:
            raise AssignmentError(
                ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored assignment, so no capacity to replay with."
            )
        windows = await self._windows(group, limit, len(algorithms))
        stream = [_measurement(w["partitions"]) for w in windows]
        iteration_s = cadence([w["window_end"] for w in windows])
        capacity = stored.capacity
        throughput = consumer_throughput or capacity * THROUGHPUT_PER_CAPACITY
        job = ReplayJob(stream, capacity, list(algorithms), iteration_s, throughput if latency else None, rebalance_s)
        results = _REPLAYED.decode(await self.pool.run(replay_job, msgspec.msgpack.encode(job)))
        return ReplayResponse(
            group=group,
            capacity=capacity,
            windows=len(windows),
            window_ends=[w["window_end"] for w in windows],
            iteration_s=iteration_s,
            results=results,
        )

    async def rates_stored(self, group: str) -> None:
        """After rates are stored: the gauges follow them. A group without an assignment yet has no signal."""
        if self.observer is not None:
            self.observer.rates_updated(group)
        try:
            await self.scale(group)
        except StoreUnavailable as exc:
            if self.observer is not None:
                self.observer.store_failed(str(exc))
        except GroupfitError as exc:  # bad rates, or every compute worker busy: the next rates try again
            log.debug("no scaling signal", extra={"fields": {"group": group, "error_code": exc.code.value}})

    async def scale(self, group: str, query: ScaleQuery = DEFAULT_SCALE_QUERY) -> ScaleSignal:
        """The action the group needs for its stored rates (app/core/decision.py), by the query's algorithm or
        the group's own, with the capacity of its stored assignment."""
        stored = await stored_group(self.store, group)
        rates = await self.store.get_rates(group)
        if rates is None:
            raise AssignmentError(
                ErrorCode.NO_RATES, f"group {group!r} has no stored rates; PUT /v1/groups/{group}/rates first."
            )
        signal = await scale_signal(group, stored, rates, query, self.assigner.limits, self.pool)
        if self.observer is not None:
            self.observer.scaled(group, signal.needed, signal.current, len(signal.overloaded))
        return signal


def _measurement(partitions: list[list]) -> Measurement:
    measurement: Measurement = {}
    for topic, partition, rate, _lag in partitions:
        measurement.setdefault(topic, {})[str(partition)] = rate
    return measurement


class ReplayJob(msgspec.Struct, array_like=True):
    """A replay, sent to a compute worker (replaying through exact or repack may take long)."""

    stream: list[Measurement]
    capacity: float
    algorithms: list[str]
    iteration_s: float
    consumer_throughput: float | None
    rebalance_s: float


_REPLAY_JOB = msgspec.msgpack.Decoder(ReplayJob)
_REPLAYED = msgspec.msgpack.Decoder(dict[str, ReplayRun])


def replay_job(payload: bytes) -> bytes:
    """The compute worker's entry: an encoded ReplayJob → the encoded runs by algorithm."""
    job = _REPLAY_JOB.decode(payload)
    return msgspec.msgpack.encode(
        _replay_runs(
            job.stream, job.capacity, job.algorithms, job.iteration_s, job.consumer_throughput, job.rebalance_s
        )
    )


def _replay_runs(
    stream: list[Measurement],
    capacity: float,
    algorithms: Sequence[str],
    iteration_s: float,
    consumer_throughput: float | None,
    rebalance_s: float,
) -> dict[str, ReplayRun]:
    from app.sim.evaluate import finite_or_null, replay_named
    from app.sim.latency import PERCENTILES, LatencyModel
    from app.sim.replay import cbs

    model = LatencyModel(consumer_throughput, iteration_s, rebalance_s) if consumer_throughput is not None else None
    runs = replay_named(stream, capacity, algorithms, keep=model is not None)
    scores = cbs(runs)
    results = {}
    for run in runs:
        latency = None
        if model is not None:
            summary = finite_or_null(run.latency(model).summary())
            latency = LatencyFigures(**{name: summary[name] for name in (*PERCENTILES, "max")})
        results[run.algorithm] = ReplayRun(
            avg_consumers=run.avg_consumers,
            avg_rscore=run.avg_rscore,
            cbs=scores[run.algorithm],
            consumers=run.consumers,
            rscore=run.rscore,
            # Rscore is the moved rate over C (Eq. 11): rate × C × seconds is the bytes that changed consumer
            moved_bytes=sum(run.rscore) * capacity * iteration_s,
            overloaded_windows=sum(1 for ok in run.within_capacity if not ok),
            **({"latency": latency} if latency is not None else {}),
        )
    return results
