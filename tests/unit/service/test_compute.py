"""The bounded pool of compute workers (issue #13): a deadline that stops the work, a full queue refused at
once, a departed client's work stopped, each worker's memory bounded, a job's refusal keeping its code."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from app.core.errors import AssignmentError, ComputeUnavailable, ErrorCode
from app.service.compute import ComputePool, joined, parted
from tests.unit.service import pool_jobs


def alive(pid: int) -> bool:
    """Running: a zombie (killed, not reaped yet) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or while, its stat was read
        return False


async def gone_within(pid: int, seconds: float = 5) -> bool:
    for _ in range(int(seconds / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.fixture
async def pool():
    pool = ComputePool(workers=1, queue=1, timeout_s=30, memory_mb=512, preload=("tests.unit.service.pool_jobs",))
    await pool.start()
    await pool.run(pool_jobs.pid, b"0")  # the worker has imported everything
    yield pool
    await pool.close()


async def test_a_job_past_the_deadline_is_answered_504_and_its_worker_killed(pool):
    first = int(await pool.run(pool_jobs.pid, b"0"))
    pool.timeout_s = 0.3
    with pytest.raises(ComputeUnavailable) as refused:
        await pool.run(pool_jobs.pid, b"30")
    assert refused.value.code is ErrorCode.COMPUTE_TIMEOUT
    assert await gone_within(first)
    pool.timeout_s = 30
    assert int(await pool.run(pool_jobs.pid, b"0")) != first  # a fresh worker took its place


async def test_a_full_queue_is_refused_at_once_with_compute_busy(pool):
    running = [asyncio.ensure_future(pool.run(pool_jobs.pid, b"0.5")) for _ in range(2)]  # one runs, one waits
    await asyncio.sleep(0.05)
    with pytest.raises(ComputeUnavailable) as refused:
        await pool.run(pool_jobs.pid, b"0")
    assert refused.value.code is ErrorCode.COMPUTE_BUSY
    assert len(set(await asyncio.gather(*running))) == 1  # both ran, one after the other, on the one worker


async def test_the_work_of_a_client_that_went_away_is_stopped(pool):
    worker = int(await pool.run(pool_jobs.pid, b"0"))
    client_left = asyncio.Event()
    job = asyncio.ensure_future(pool.run(pool_jobs.pid, b"30", gone=client_left.wait))
    await asyncio.sleep(0.1)
    client_left.set()
    with pytest.raises(ComputeUnavailable) as stopped:
        await job
    assert stopped.value.code is ErrorCode.COMPUTE_TIMEOUT
    assert await gone_within(worker)


async def test_a_cancelled_request_stops_its_work(pool):
    worker = int(await pool.run(pool_jobs.pid, b"0"))
    job = asyncio.ensure_future(pool.run(pool_jobs.pid, b"30"))
    await asyncio.sleep(0.1)
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert await gone_within(worker)


async def test_a_refusal_in_the_worker_keeps_its_code_and_the_worker(pool):
    worker = int(await pool.run(pool_jobs.pid, b"0"))
    with pytest.raises(AssignmentError) as refused:
        await pool.run(pool_jobs.refuse, b"no such partition.")
    assert (refused.value.code, refused.value.message, refused.value.details) == (
        ErrorCode.INVALID_PARAMETER,
        "no such partition.",
        {"at": "x"},
    )
    assert int(await pool.run(pool_jobs.pid, b"0")) == worker


async def test_a_job_beyond_the_worker_memory_limit_fails_alone(pool):
    worker = int(await pool.run(pool_jobs.pid, b"0"))
    with pytest.raises(AssignmentError) as refused:
        await pool.run(pool_jobs.allocate, b"4096")
    assert refused.value.code is ErrorCode.TOO_MANY_PARTITIONS
    assert await gone_within(worker)  # not trusted after a MemoryError: replaced
    assert await pool.run(pool_jobs.allocate, b"1") == b"\0"


async def test_a_wait_cancelled_as_a_worker_is_released_leaves_the_pool_consistent():
    pool = ComputePool(workers=1, queue=1, timeout_s=30, memory_mb=512)
    pool._alive = 1  # one worker, busy: a request has to wait
    waiting = asyncio.ensure_future(pool._checkout())
    await asyncio.sleep(0)
    waiting.cancel()  # its deadline passes...
    worker = object()
    pool._release(worker)  # ...in the same turn as the busy worker comes back
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pool._idle == [worker] and not pool._waiting


# issue #27: fair shares, crashes and panics, the memory limit above the worker's own baseline


async def test_a_tenant_holds_no_more_than_its_share_and_the_others_get_in():
    pool = ComputePool(workers=1, queue=3, timeout_s=30, memory_mb=512, tenant_share=0.5)
    assert (pool.places, pool.share) == (4, 2)

    def refused(*tenants: str) -> dict:
        with pytest.raises(ComputeUnavailable) as refusal:
            pool.admit(tenants)
        assert refusal.value.code is ErrorCode.COMPUTE_BUSY
        return refusal.value.details

    first, second = pool.admit(("token a", "group 'g'")), pool.admit(("token a",))
    assert refused("token a")["tenant"] == "token a"
    third = pool.admit(("token b", "group 'g'"))  # another token still gets in
    assert refused("token c", "group 'g'")["tenant"] == "group 'g'"  # a group is a tenant too, whatever the token
    fourth = pool.admit(("token c",))
    assert "tenant" not in refused("token d")  # the pool is full
    first.close()
    first.close()  # (once)
    again = pool.admit(("token a",))  # a place given back is a place to take
    for ticket in (second, third, fourth, again):
        ticket.close()
    assert pool._admitted == 0 and not pool._held


async def test_waiting_tenants_are_served_in_turn_not_first_come_first_served():
    pool = ComputePool(workers=1, queue=4, timeout_s=30, memory_mb=512)
    pool._alive = 1  # one worker, busy
    served: list[str] = []

    async def wait(lane: str) -> None:
        worker = await pool._checkout(lane)
        served.append(lane)
        pool._release(worker)

    waits = [asyncio.ensure_future(wait(lane)) for lane in ("a", "a", "a", "b")]
    await asyncio.sleep(0)
    pool._release(object())
    await asyncio.gather(*waits)
    assert served == ["a", "b", "a", "a"]  # b's one request waits for one of a's, not for all three


@pytest.mark.parametrize(
    ("job", "payload", "said"),
    [(pool_jobs.crash, b"", "SIGSEGV"), (pool_jobs.panic, b"index out of bounds", "index out of bounds")],
)
async def test_a_worker_killed_or_panicking_answers_compute_failed_and_is_replaced(pool, job, payload, said):
    worker = int(await pool.run(pool_jobs.pid, b"0"))
    with pytest.raises(AssignmentError) as failed:
        await pool.run(job, payload)
    assert failed.value.code is ErrorCode.COMPUTE_FAILED and said in failed.value.message
    assert await gone_within(worker)
    assert int(await pool.run(pool_jobs.pid, b"0")) != worker


async def test_a_panic_on_a_thread_answers_compute_failed(pool):
    with pytest.raises(AssignmentError) as failed:
        await pool.run_in_thread(pool_jobs.panic, b"on a thread")
    assert failed.value.code is ErrorCode.COMPUTE_FAILED


async def test_the_memory_limit_is_the_workers_own_baseline_plus_its_allowance(pool):
    limit, now = map(int, (await pool.run(pool_jobs.address_space, b"")).split())
    assert pool.baseline_bytes > 0 and limit == pool.baseline_bytes + (512 << 20)
    assert now <= limit
    # what a worker has once started is not counted against its allowance: 400 of the 512 MB fit
    assert await pool.run(pool_jobs.allocate, b"400") == b"\0"


async def test_a_tickets_deadline_covers_what_it_wraps_and_its_place_is_given_back(pool):
    pool.timeout_s = 0.2
    with pytest.raises(ComputeUnavailable) as late:
        async with pool.admit(("token a",)):
            await asyncio.sleep(5)  # e.g. a store read that hangs
    assert late.value.code is ErrorCode.COMPUTE_TIMEOUT and pool._admitted == 0 and not pool._held


class _Inner(msgspec.Struct, array_like=True):
    body: bytes
    rates: bytes | None
    small: int


class _Job(msgspec.Struct, array_like=True):
    inner: _Inner
    windows: list[bytes]
    empty: bytes
    name: str


def test_a_jobs_bytes_travel_beside_its_payload_and_come_back_in_place():
    job = _Job(_Inner(b"x" * 100_000, None, 7), [b"w1", b"w2" * 1000], b"", "g")
    payload, blobs = parted(job)
    assert blobs == [b"x" * 100_000, b"w1", b"w2" * 1000] and len(payload) < 200  # never copied into it
    assert joined(msgspec.msgpack.Decoder(_Job), payload, blobs) == job


async def test_large_blobs_and_results_cross_the_socket_whole(pool):
    blob = bytes(range(256)) * 20_000  # 5 MB: written and read a slice at a time
    job = pool_jobs.Blobs([blob, b"", b"end"])
    assert await pool.run(pool_jobs.echo, job) == blob + b"end"
    chunks = await pool.run_chunked(pool_jobs.echo, pool_jobs.Blobs([blob]))
    assert len(chunks) == 5 and b"".join(chunks) == blob
