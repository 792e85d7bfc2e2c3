"""The v1 endpoints. Thin: parse (msgspec), call app.core, persist (app.store), answer."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from fastapi import APIRouter, Header, Path, Query, Request
from starlette.responses import Response

from app.api import examples, schemas
from app.api.errors import ApiError, decode_error
from app.core.algorithm import algorithms, get_algorithm
from app.core.assign import answer_document, capacity_of, solve
from app.core.model import PartitionKey, build_problem, sorted_consumers, validate_partitions
from app.settings import Settings
from app.store.groups import GroupStore, Replay, StoredGroup

router = APIRouter()
INLINE_PARTITIONS = 5000
GroupPath = Annotated[str, Path(pattern=r"^[!-.0-~]{1,255}$", description="consumer group id (no spaces or '/')")]

_DECODERS = {
    schema: msgspec.json.Decoder(schema)
    for schema in (schemas.AssignRequest, schemas.RatesUpdate, schemas.EvaluateRequest)
}
_encode = msgspec.json.Encoder().encode


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json_content(name: str, example: Any = None) -> dict[str, Any]:
    media: dict[str, Any] = {"schema": _ref(name)}
    if example is not None:
        media["example"] = example
    return {"application/json": media}


def _body(name: str, example: Any = None) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": _json_content(name, example)}}


def _answers(
    ok: str | None, *errors: int, status: int = 200, examples: dict[int, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The documented answers; every /v1 route may also answer 401 and 403 when tokens are configured."""
    examples = examples or {}
    responses: dict[int | str, dict[str, Any]] = {}
    if ok:
        responses[status] = {"description": "OK", "content": _json_content(ok, examples.get(status))}
    for code in (*errors, 401, 403):
        responses[code] = {"description": "error", "content": _json_content("ErrorResponse", examples.get(code))}
    return responses


def _json(document: Any, status: int = 200) -> Response:
    return Response(_encode(document), status_code=status, media_type="application/json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(
        "body_too_large", f"the request body is larger than {limit} bytes; send fewer partitions per request."
    )


def _decode(request_type: type, body: bytes) -> Any:
    if not body:
        raise ApiError("invalid_request", "the request body is empty; send a JSON object.")
    try:
        return _DECODERS[request_type].decode(body)
    except msgspec.MsgspecError as exc:
        raise decode_error(exc) from None


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _store(request: Request) -> GroupStore:
    return request.app.state.store


def _authorize(request: Request, group: str | None, write: bool) -> None:
    request.app.state.authorizer.check(request, group, write)


def _keys(refs: list[schemas.PartitionRef] | list[schemas.PartitionRate]) -> list[PartitionKey]:
    return [(ref.topic, ref.partition) for ref in refs]


def _assignment_doc(assignment: dict[str, list[PartitionKey]]) -> dict[str, list[dict[str, Any]]]:
    return {c: [{"topic": t, "partition": p} for t, p in assignment[c]] for c in sorted_consumers(assignment)}


@router.post(
    "/v1/assign",
    summary="Compute a new assignment (and store it as the group's next version)",
    openapi_extra=_body("AssignRequest", examples.ASSIGN_REQUEST),
    responses=_answers(
        "AssignResponse",
        404,
        409,
        413,
        422,
        503,
        examples={
            200: examples.ASSIGN_ANSWER,
            409: examples.VERSION_CONFLICT_ERROR,
            422: examples.DUPLICATE_PARTITION_ERROR,
        },
    ),
    response_class=Response,
)
async def assign(
    request: Request,
    delta: Literal["sparse", "dense"] = Query("sparse", description="dense adds the full matrix"),
    idempotency_key: str | None = Header(
        None, max_length=200, description="a retry with the same key and body gets the same answer"
    ),
) -> Response:
    settings = _settings(request)
    body = await _read_body(request, settings.max_body_bytes)
    req: schemas.AssignRequest = _decode(schemas.AssignRequest, body)
    _authorize(request, req.group, write=bool(req.group) and not req.dry_run)
    algorithm = get_algorithm(req.algorithm)
    params = algorithm.parse_params(req.params)
    group, store = req.group, _store(request)
    fingerprint = ""  # of the request an Idempotency-Key stands for; only hashed when it is stored
    if group and idempotency_key:
        digest = hashlib.sha256(body)
        digest.update(delta.encode())
        fingerprint = digest.hexdigest()
        replay = await store.get_replay(group, idempotency_key)
        if replay is not None:
            return _replayed(replay, fingerprint)
    stored = await store.get(group) if group else None
    partitions = req.partitions
    if partitions is None:
        if not group:
            raise ApiError(
                "invalid_request",
                "give 'partitions', or a 'group' whose rates were stored with PUT /v1/groups/{group}/rates.",
            )
        rates = await store.get_rates(group)
        if rates is None:
            raise ApiError(
                "no_rates",
                f"group {group!r} has no stored rates; send 'partitions' or PUT /v1/groups/{group}/rates first.",
            )
        partitions = msgspec.convert(rates["partitions"], list[schemas.PartitionRate])
    if len(partitions) > settings.max_partitions:
        raise ApiError(
            "too_many_partitions",
            f"{len(partitions)} partitions is more than this service takes ({settings.max_partitions}); split the group.",
        )
    if req.previous is not None:
        previous = {c: _keys(held) for c, held in req.previous.items()}
    else:
        previous = stored.assignment if stored else {}
    capacity_doc = {
        "capacity": req.capacity,
        "consumer_throughput": req.consumer_throughput,
        "iteration_s": req.iteration_s,
        "rebalance_s": req.rebalance_s,
    }
    if req.capacity is None and req.consumer_throughput is None and stored:
        capacity_doc["capacity"] = stored.capacity  # a group keeps its capacity until told otherwise

    def compute() -> tuple[Any, dict[str, Any]]:
        problem = build_problem(
            _keys(partitions),
            [p.rate for p in partitions],
            [p.lag for p in partitions],
            capacity_of(capacity_doc),
            previous,
            req.members,
        )
        started = time.perf_counter()
        outcome = solve(problem, algorithm, params)
        request.app.state.metrics.compute.labels(algorithm.name).observe(time.perf_counter() - started)
        dense = delta == "dense"
        if dense and outcome.dense_delta_size() > settings.max_dense_cells:
            raise ApiError(
                "delta_too_large",
                f"the dense delta would have {outcome.dense_delta_size()} cells (limit {settings.max_dense_cells}); "
                "use the sparse delta (the default).",
            )
        return outcome, answer_document(outcome, dense=dense)

    # Small requests are computed on the event loop (a thread hop costs more than ~1 ms of work);
    # large ones in a thread so health checks and other requests are not held up meanwhile.
    if len(partitions) < INLINE_PARTITIONS:
        outcome, answer = compute()
    else:
        outcome, answer = await asyncio.to_thread(compute)
    answer["group"] = group
    answer["version"] = None
    if group and not req.dry_run:
        expected = req.expected_version if req.expected_version is not None else (stored.version if stored else 0)
        keys, updated_at = outcome.problem.keys, _now()
        write = await store.write_version(
            group,
            expected,
            outcome.algorithm,
            outcome.problem.capacity,
            {c: [keys[j] for j in held] for c, held in outcome.assignment.items()},
            updated_at,
            {
                "algorithm": outcome.algorithm,
                "rscore": outcome.rscore,
                "consumer_count": outcome.consumer_count,
                "moves_count": len(outcome.moved),
                "updated_at": updated_at,
            },
            Replay(idempotency_key, fingerprint, _encode(answer)) if idempotency_key else None,
        )
        if write.replay is not None:  # a concurrent request with the same Idempotency-Key was stored first
            return _replayed(write.replay, fingerprint)
        if write.outcome == "conflict":
            raise ApiError(
                "version_conflict",
                f"group {group!r} is at version {write.version}, not {expected}; "
                f"read it again and retry with expected_version={write.version}.",
                {"current_version": write.version, "expected_version": expected},
            )
        answer["version"] = write.version
        metrics = request.app.state.metrics
        metrics.rscore.labels(group).set(outcome.rscore)
        metrics.consumers.labels(group).set(outcome.consumer_count)
    return _json(answer)


def _replayed(replay: Replay, fingerprint: str) -> Response:
    """The stored answer of the request that first used this Idempotency-Key, if this is that request again."""
    if replay.fingerprint != fingerprint:
        raise ApiError(
            "idempotency_key_reused",
            "this Idempotency-Key was used with another request body; use a new key for a new request.",
        )
    answer = msgspec.json.decode(replay.answer)
    answer["version"] = replay.version
    return _json(answer)


@router.get(
    "/v1/algorithms",
    summary="The registered algorithms and their parameter schemas",
    responses=_answers("AlgorithmList"),
    response_class=Response,
)
async def list_algorithms(request: Request) -> Response:
    _authorize(request, None, write=False)
    return _json(
        {
            "algorithms": [
                {"name": a.name, "description": a.description, "source": a.source, "params": a.params_schema()}
                for a in algorithms().values()
            ]
        }
    )


async def _stored_group(request: Request, group: str) -> StoredGroup:
    stored = await _store(request).get(group)
    if stored is None:
        raise ApiError(
            "group_not_found", f"group {group!r} has no stored assignment; POST /v1/assign with 'group' first."
        )
    return stored


@router.get(
    "/v1/groups/{group}",
    summary="The group's current assignment and version",
    responses=_answers("GroupState", 404, 503),
    response_class=Response,
)
async def get_group(request: Request, group: GroupPath) -> Response:
    _authorize(request, group, write=False)
    stored = await _stored_group(request, group)
    return _json(
        {
            "group": group,
            "version": stored.version,
            "algorithm": stored.algorithm,
            "capacity": stored.capacity,
            "assignment": _assignment_doc(stored.assignment),
            "updated_at": stored.updated_at,
        }
    )


@router.delete(
    "/v1/groups/{group}",
    status_code=204,
    summary="Forget the group (assignment, history, rates)",
    responses={**_answers(None, 404, 503), 204: {"description": "deleted"}},
    response_class=Response,
)
async def delete_group(request: Request, group: GroupPath) -> Response:
    _authorize(request, group, write=True)
    if not await _store(request).delete(group):
        raise ApiError("group_not_found", f"group {group!r} has nothing stored.")
    request.app.state.metrics.forget_group(group)
    return Response(status_code=204)


@router.get(
    "/v1/groups/{group}/history",
    summary="Past versions, newest first",
    responses=_answers("GroupHistory", 404, 422, 503),
    response_class=Response,
)
async def group_history(request: Request, group: GroupPath, limit: int = Query(100, ge=1, le=100_000)) -> Response:
    _authorize(request, group, write=False)
    versions = await _store(request).history(group, limit)
    if not versions:
        raise ApiError("group_not_found", f"group {group!r} has no history.")
    return _json({"group": group, "versions": versions})


@router.put(
    "/v1/groups/{group}/rates",
    summary="Store the group's observed rates and lags (the rates job writes here)",
    openapi_extra=_body("RatesUpdate", examples.RATES_UPDATE),
    responses=_answers("RatesAck", 413, 422, 503),
    response_class=Response,
)
async def put_rates(request: Request, group: GroupPath) -> Response:
    _authorize(request, group, write=True)
    settings = _settings(request)
    update: schemas.RatesUpdate = _decode(schemas.RatesUpdate, await _read_body(request, settings.max_body_bytes))
    if len(update.partitions) > settings.max_partitions:
        raise ApiError("too_many_partitions", f"more than {settings.max_partitions} partitions; split the group.")
    validate_partitions(
        _keys(update.partitions), [p.rate for p in update.partitions], [p.lag for p in update.partitions]
    )
    try:
        datetime.fromisoformat(update.window_end)
    except ValueError:
        raise ApiError("invalid_request", f"window_end {update.window_end!r} is not an RFC 3339 time.") from None
    updated_at = _now()
    await _store(request).put_rates(
        group, {"partitions": update.partitions, "window_end": update.window_end, "updated_at": updated_at}
    )
    return _json(
        {
            "group": group,
            "partition_count": len(update.partitions),
            "window_end": update.window_end,
            "updated_at": updated_at,
        }
    )


@router.get(
    "/v1/groups/{group}/rates",
    summary="The group's latest stored rates",
    responses=_answers("StoredRates", 404, 503),
    response_class=Response,
)
async def get_rates(request: Request, group: GroupPath) -> Response:
    _authorize(request, group, write=False)
    rates = await _store(request).get_rates(group)
    if rates is None:
        raise ApiError("group_not_found", f"group {group!r} has no stored rates.")
    return _json({"group": group, **rates})


@router.post(
    "/v1/evaluate",
    summary="Replay a rate stream through algorithms: consumers, Rscore, CBS",
    openapi_extra=_body("EvaluateRequest"),
    responses=_answers("EvaluateResponse", 413, 422),
    response_class=Response,
)
async def evaluate(request: Request) -> Response:
    from app.sim.evaluate import check_names, evaluate_document

    _authorize(request, None, write=False)
    settings = _settings(request)
    req: schemas.EvaluateRequest = _decode(schemas.EvaluateRequest, await _read_body(request, settings.max_body_bytes))
    cells = sum(len(partitions) for measurement in req.stream for partitions in measurement.values())
    if cells * max(1, len(req.algorithms)) > settings.max_evaluate_cells:
        raise ApiError(
            "too_many_partitions",
            f"{cells} partition-measurements × {len(req.algorithms)} algorithms exceeds {settings.max_evaluate_cells}; "
            "send a shorter stream or fewer algorithms, or run `groupfit evaluate` locally.",
        )
    check_names(req.algorithms)
    return _json(await asyncio.to_thread(evaluate_document, msgspec.to_builtins(req)))


@router.get(
    "/healthz",
    summary="The process is up",
    responses={200: {"description": "OK", "content": {"application/json": {"schema": _ref("Health")}}}},
    response_class=Response,
)
async def healthz() -> Response:
    return _json({"status": "ok"})


@router.get(
    "/readyz",
    summary="Redis answers",
    response_class=Response,
    responses={
        200: {"description": "OK", "content": {"application/json": {"schema": _ref("Health")}}},
        503: {"description": "error", "content": {"application/json": {"schema": _ref("ErrorResponse")}}},
    },
)
async def readyz(request: Request) -> Response:
    await _store(request).ping()
    return _json({"status": "ready"})
