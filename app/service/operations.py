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
    ReplayResponse,
    ReplayRun,
    ScaleQuery,
    ScaleSignal,
    rates_history,
    stored_windows,
)
from app.codec.wire import INLINE_BYTES, encode
from app.core.errors import AssignmentError, ErrorCode, GroupfitError
from app.service.assign import AssignService
from app.service.compute import ComputePool, Gone, joined
from app.service.groups import stored_group
from app.service.scaling import scale_signal
from app.settings import Settings
from app.sim.history import cadence
from app.sim.latency import THROUGHPUT_PER_CAPACITY
from app.store.groups import GroupStore, StoreUnavailable, WindowEntry

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


LISTING_PAGE = 1000
"""The most groups one page of GET /v1/groups shows."""
LISTING_LOOKS = 10_000
"""The most names one page of the listing looks at (filtered by `contains`): past them the page ends early, with
its cursor, so a filter that matches little costs each request a bounded read."""
_CHUNK = 1000


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
        self._scaling: dict[str, bool] = {}  # groups whose scale is being computed → rates stored meanwhile

    async def groups(
        self, allowed: frozenset[str] | None, contains: str, limit: int, after: str, tenants: tuple[str, ...]
    ) -> GroupList:
        """One page: at most `limit` groups after `after` whose name contains `contains`, among those the token
        may read, in name order, and the cursor of the next page. Admitted as a computation is (the page's reads
        are bounded, but many at once are not)."""
        async with self.pool.admit(tenants):
            if allowed is not None:  # the token's own groups: no need to look at the others
                matching = sorted(name for name in allowed if name > after and contains in name)
                names, cursor = matching[:limit], matching[limit - 1] if len(matching) > limit else None
            else:
                names, cursor = await self._catalog_page(contains, limit, after)
            summaries = await self.store.summaries(names)
        now = datetime.now().astimezone()
        return GroupList(
            [
                GroupSummary(
                    group=s.group,
                    version=s.version,
                    algorithm=s.algorithm,
                    capacity=s.capacity,
                    consumers=s.consumers,
                    rscore=s.rscore,
                    updated_at=s.updated_at,
                    rates_window_end=s.rates_window_end,
                    rates_age_s=_age_s(s.rates_updated_at, now),
                    partition_count=s.partition_count,
                )
                for s in summaries
            ],
            truncated=cursor is not None,
            next=cursor,
        )

    async def _catalog_page(self, contains: str, limit: int, after: str) -> tuple[list[str], str | None]:
        """The names of a page, read from the catalog in chunks, and the last name looked at (None: the end)."""
        names: list[str] = []
        looked = 0
        while looked < LISTING_LOOKS:
            chunk = await self.store.group_names(after, _CHUNK)
            for name in chunk:
                looked += 1
                after = name
                if contains in name:
                    names.append(name)
                    if len(names) == limit:
                        return names, after
            if len(chunk) < _CHUNK:
                return names, None
        return names, after

    async def _entries(self, group: str, limit: int, algorithms: int = 1) -> list[WindowEntry]:
        """The newest `limit` windows as their log names them, refused before any is read when their cells (the
        partitions of each window, summed) × algorithms exceed GROUPFIT_MAX_EVALUATE_CELLS."""
        entries = await self.store.rates_index(group, limit)
        if not entries:
            raise AssignmentError(
                ErrorCode.GROUP_NOT_FOUND,
                f"group {group!r} has no stored rates windows; PUT /v1/groups/{group}/rates first.",
            )
        cells = sum(entry.cells for entry in entries) * algorithms
        if cells > self.max_cells:
            fitting, total = 0, 0
            for entry in reversed(entries):  # the newest windows that fit
                total += entry.cells * algorithms
                if total > self.max_cells:
                    break
                fitting += 1
            raise AssignmentError(
                ErrorCode.TOO_MANY_PARTITIONS,
                f"the newest {len(entries)} windows hold {cells // algorithms} partition-measurements × {algorithms} "
                f"algorithm(s), more than {self.max_cells} cells; ask for at most {max(1, fitting)} windows"
                + (" or fewer algorithms." if fitting == 0 else "."),
                {"windows_that_fit": fitting},
            )
        return entries

    async def rates_history(self, group: str, limit: int, tenants: tuple[str, ...]) -> list[bytes]:
        """The answer's JSON (in slices): decoded on the event loop when small, else in a compute worker (admitted
        first)."""
        entries = await self._entries(group, limit)
        if sum(entry.bytes for entry in entries) <= INLINE_BYTES:
            return [encode(rates_history(group, await self.store.rates_windows_json(group, entries)))]
        async with self.pool.admit(tenants) as ticket:
            windows = await self.store.rates_windows_json(group, entries)
            return await self.pool.run_chunked(history_job, HistoryJob(group, windows), None, ticket)

    async def replay(
        self,
        group: str,
        algorithms: Sequence[str],
        limit: int,
        latency: bool,
        consumer_throughput: float | None,
        rebalance_s: float,
        tenants: tuple[str, ...] = (),
        gone: Gone | None = None,
    ) -> bytes:
        """The stored windows, oldest first, replayed through each algorithm from its own previous assignment,
        with the group's capacity. Each window lasts the median time between the stored windows' ends. Refused
        (too large, or the pool full) before the windows are read; they are decoded in the compute worker."""
        from app.sim.evaluate import check_names

        check_names(algorithms)
        capacity = await self.store.capacity(group)
        if capacity is None:
            raise AssignmentError(
                ErrorCode.GROUP_NOT_FOUND, f"group {group!r} has no stored assignment, so no capacity to replay with."
            )
        entries = await self._entries(group, limit, len(algorithms))
        async with self.pool.admit(tenants) as ticket:
            windows = await self.store.rates_windows_json(group, entries)
            throughput = consumer_throughput or capacity * THROUGHPUT_PER_CAPACITY
            job = ReplayJob(group, windows, capacity, list(algorithms), throughput if latency else None, rebalance_s)
            return await self.pool.run(replay_job, job, gone, ticket)

    async def rates_stored(self, group: str, tenants: tuple[str, ...] = ()) -> None:
        """After rates are stored: the gauges follow them. A group without an assignment yet has no signal. One
        computation per group at a time: rates stored while it runs make it run once more after, not once each."""
        if self.observer is not None:
            self.observer.rates_updated(group)
        if group in self._scaling:
            self._scaling[group] = True
            return
        self._scaling[group] = False
        try:
            while True:
                try:
                    await self.scale(group, tenants=tenants)
                except StoreUnavailable as exc:
                    if self.observer is not None:
                        self.observer.store_failed(str(exc))
                except GroupfitError as exc:  # bad rates, or every compute worker busy: the next rates try again
                    log.debug("no scaling signal", extra={"fields": {"group": group, "error_code": exc.code.value}})
                if not self._scaling[group]:
                    return
                self._scaling[group] = False
        finally:
            del self._scaling[group]

    async def scale(
        self, group: str, query: ScaleQuery = DEFAULT_SCALE_QUERY, tenants: tuple[str, ...] = ()
    ) -> ScaleSignal:
        """The action the group needs for its stored rates (app/core/decision.py), by the query's algorithm or
        the group's own, with the capacity of its stored assignment (app/service/scaling.py: in a compute worker,
        admitted for `tenants`, unless the group is small and the algorithm cheap)."""
        stored = await stored_group(self.store, group)
        rates = await self.store.get_rates_json(group)
        if rates is None:
            raise AssignmentError(
                ErrorCode.NO_RATES, f"group {group!r} has no stored rates; PUT /v1/groups/{group}/rates first."
            )
        signal = await scale_signal(group, stored, rates, query, self.assigner.limits, self.pool, tenants)
        if self.observer is not None:
            self.observer.scaled(group, signal.needed, signal.current, len(signal.overloaded))
        return signal


def _measurement(partitions: list[tuple[str, int, float, float | None]]) -> Measurement:
    measurement: Measurement = {}
    for topic, partition, rate, _lag in partitions:
        measurement.setdefault(topic, {})[str(partition)] = rate
    return measurement


class HistoryJob(msgspec.Struct, array_like=True):
    """A large rates history, sent to a compute worker as stored: it decodes the windows and writes the answer."""

    group: str
    windows: list[bytes]


_HISTORY_JOB = msgspec.msgpack.Decoder(HistoryJob)


def history_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a HistoryJob → the JSON of GET …/rates/history."""
    job = joined(_HISTORY_JOB, payload, blobs)
    return encode(rates_history(job.group, job.windows))


class ReplayJob(msgspec.Struct, array_like=True):
    """A replay, sent to a compute worker with the windows as stored (replaying through exact or repack may take
    long; decoding many windows does too)."""

    group: str
    windows: list[bytes]
    capacity: float
    algorithms: list[str]
    consumer_throughput: float | None
    rebalance_s: float


_REPLAY_JOB = msgspec.msgpack.Decoder(ReplayJob)


def replay_job(payload: bytes, *blobs: bytes) -> bytes:
    """The compute worker's entry: a ReplayJob → the JSON of GET …/replay."""
    job = joined(_REPLAY_JOB, payload, blobs)
    windows = stored_windows(job.windows)
    ends = [w.window_end for w in windows]
    iteration_s = cadence(ends)
    results = _replay_runs(
        [_measurement(w.partitions) for w in windows],
        job.capacity,
        job.algorithms,
        iteration_s,
        job.consumer_throughput,
        job.rebalance_s,
    )
    return encode(
        ReplayResponse(
            group=job.group,
            capacity=job.capacity,
            windows=len(windows),
            window_ends=ends,
            iteration_s=iteration_s,
            results=results,
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
