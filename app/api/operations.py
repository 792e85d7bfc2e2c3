"""Routes for operators: the groups listing, a group's rates history and its replay through algorithms, and the
scaling decision (app.service.operations, app/core/decision.py)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.api.auth import Authenticated, ReadableGroup
from app.api.dependencies import OperationsServiceDep
from app.api.endpoints import answers, client_gone, endpoint, json_response
from app.codec.operations import scale_query
from app.core.decision import MIN_GAIN, Guards
from app.core.errors import AssignmentError, ErrorCode
from app.service.operations import LISTING_PAGE

router = APIRouter()


@endpoint(
    router,
    "GET",
    "/v1/groups",
    "list_groups",
    "groups",
    "One page of the stored groups (those the token may read), with their last version and the age of their rates",
    answers("GroupList", 422, 503),
)
async def list_groups(
    grant: Authenticated,
    operations: OperationsServiceDep,
    contains: str = Query("", max_length=255, description="only groups whose name contains this"),
    limit: int = Query(LISTING_PAGE, ge=1, le=LISTING_PAGE, description="the most groups on this page"),
    after: str = Query("", max_length=255, description="the page after this cursor: the `next` of the page before"),
) -> Response:
    return json_response(await operations.groups(grant.groups, contains, limit, after, grant.tenants()))


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}/rates/history",
    "get_rates_history",
    "rates",
    "The group's stored rates windows, oldest first (bounded by GROUPFIT_RATES_HISTORY_LIMIT and _MAX_AGE_S)",
    answers("RatesHistory", 404, 422, 503, 504),
)
async def rates_history(
    grant: Authenticated,
    group: ReadableGroup,
    operations: OperationsServiceDep,
    limit: int = Query(1000, ge=1, le=100_000),
) -> Response:
    return json_response(await operations.rates_history(group, limit, grant.tenants(group)))


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}/replay",
    "replay_group",
    "evaluation",
    "The group's stored rates windows replayed through algorithms: consumers, Rscore, moved bytes, tail latency",
    answers("ReplayResponse", 404, 422, 503, 504),
)
async def replay_group(
    request: Request,
    grant: Authenticated,
    group: ReadableGroup,
    operations: OperationsServiceDep,
    algorithms: str = Query("mwf,bfd", max_length=1000, description="comma-separated, as in POST /v1/evaluate"),
    windows: int = Query(200, ge=1, le=100_000, description="the newest this many windows"),
    latency: bool = Query(True, description="add latency percentiles (Landau et al. §VI-C)"),
    consumer_throughput: float | None = Query(
        None, gt=0, description="C̄ of the latency model; default 1.33 × the group's capacity, as in the paper"
    ),
    rebalance_s: float = Query(5.0, ge=0, le=3600),
) -> Response:
    names = [name.strip() for name in algorithms.split(",") if name.strip()]
    if not names:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, "give at least one algorithm, e.g. ?algorithms=mwf,bfd.")
    replayed = await operations.replay(
        group, names, windows, latency, consumer_throughput, rebalance_s, grant.tenants(group), client_gone(request)
    )
    return json_response(replayed)


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}/scale",
    "get_scale",
    "groups",
    "What the group needs for its stored rates: up, down, reass (the same members, reassigned) or none, with why",
    answers("ScaleSignal", 404, 422, 503, 504),
)
async def scale(
    grant: Authenticated,
    group: ReadableGroup,
    operations: OperationsServiceDep,
    algorithm: str | None = Query(None, max_length=100, description="default: the group's stored algorithm"),
    params: str | None = Query(
        None,
        max_length=10_000,
        description='the algorithm\'s parameters, a JSON object, e.g. {"mu": 200, "w_sla": 0.5}',
    ),
    member_capacities: str | None = Query(
        None, max_length=100_000, description='members of their own capacity, a JSON object, e.g. {"c1": 200}'
    ),
    f_up: float | None = Query(
        None, gt=0, le=1, description="up when the algorithm packing into f_up·C needs more consumers (default 1)"
    ),
    f_down: float | None = Query(
        None, gt=0, lt=1, description="down when packing into f_down·C still needs fewer (default 0.7)"
    ),
    min_gain: float = Query(
        MIN_GAIN, ge=0, allow_inf_nan=False, description="excess (in consumers) a reassignment must remove"
    ),
    max_rscore: float | None = Query(
        None, ge=0, allow_inf_nan=False, description="most Rscore a reassignment may spend"
    ),
    max_moves: int | None = Query(None, ge=0, description="most partitions a reassignment may move"),
    min_interval_s: float = Query(
        0, ge=0, le=86_400, description="no reassignment while the stored assignment is younger than this"
    ),
) -> Response:
    guards = Guards(f_up, f_down, min_gain, max_rscore, max_moves, min_interval_s)
    query = scale_query(params, member_capacities, algorithm, guards)
    return json_response(await operations.scale(group, query, grant.tenants(group)))
