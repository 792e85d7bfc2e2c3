"""A group's stored state: GET and DELETE /v1/groups/{group}, and its history."""

from __future__ import annotations

from fastapi import APIRouter, Query
from starlette.responses import Response

from app.api.auth import ReadableGroup, WritableGroup
from app.api.dependencies import GroupServiceDep, MetricsDep
from app.api.endpoints import answers, endpoint, json_response

router = APIRouter()


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}",
    "get_group",
    "groups",
    "The group's current assignment and version",
    answers("GroupState", 404, 422, 503),
)
async def get_group(group: ReadableGroup, groups: GroupServiceDep) -> Response:
    return json_response(await groups.state(group))


@endpoint(
    router,
    "DELETE",
    "/v1/groups/{group}",
    "delete_group",
    "groups",
    "Forget the group (assignment, history, rates)",
    {**answers(None, 404, 422, 503), 204: {"description": "deleted"}},
    status_code=204,
    scope="write",
)
async def delete_group(group: WritableGroup, groups: GroupServiceDep, metrics: MetricsDep) -> Response:
    await groups.delete(group)
    metrics.forget_group(group)
    return Response(status_code=204)


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}/history",
    "get_group_history",
    "groups",
    "Past versions, newest first",
    answers("GroupHistory", 404, 422, 503),
)
async def group_history(
    group: ReadableGroup, groups: GroupServiceDep, limit: int = Query(100, ge=1, le=100_000)
) -> Response:
    return json_response(await groups.history(group, limit))
