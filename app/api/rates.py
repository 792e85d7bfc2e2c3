"""A group's observed rates: PUT (the rates job writes here) and GET /v1/groups/{group}/rates."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from app.api import examples
from app.api.auth import Authenticated, ReadableGroup, WritableGroup
from app.api.dependencies import GroupServiceDep, OperationsServiceDep
from app.api.endpoints import answers, endpoint, json_response, read_body, request_body

router = APIRouter()


@endpoint(
    router,
    "PUT",
    "/v1/groups/{group}/rates",
    "put_rates",
    "rates",
    "Store the group's observed rates and lags (the rates job writes here)",
    answers("RatesAck", 413, 415, 422, 503, 504),
    body=request_body("RatesUpdate", examples.RATES_UPDATE),
    scope="write",
)
async def put_rates(
    request: Request,
    grant: Authenticated,
    group: WritableGroup,
    groups: GroupServiceDep,
    operations: OperationsServiceDep,
) -> Response:
    tenants = grant.tenants(group)
    response = json_response(await groups.put_rates(group, await read_body(request), tenants))
    # the scaling signal (and its gauge) follows the rates, after the answer is sent, admitted as theirs
    response.background = BackgroundTask(operations.rates_stored, group, tenants)
    return response


@endpoint(
    router,
    "GET",
    "/v1/groups/{group}/rates",
    "get_rates",
    "rates",
    "The group's latest stored rates",
    answers("StoredRates", 404, 422, 503),
)
async def get_rates(group: ReadableGroup, groups: GroupServiceDep) -> Response:
    return json_response(await groups.rates(group))
