"""A group's observed rates: PUT (the rates job writes here) and GET /v1/groups/{group}/rates."""

from __future__ import annotations

import msgspec
from fastapi import APIRouter, Request
from starlette.background import BackgroundTask
from starlette.responses import Response

from app.api import examples
from app.api.auth import ReadableGroup, WritableGroup
from app.api.dependencies import GroupServiceDep, OperationsServiceDep
from app.api.endpoints import answers, endpoint, json_response, read_body, request_body
from app.codec.groups import RatesUpdate
from app.codec.wire import decode

router = APIRouter()

_RATES = msgspec.json.Decoder(RatesUpdate)


@endpoint(
    router,
    "PUT",
    "/v1/groups/{group}/rates",
    "put_rates",
    "rates",
    "Store the group's observed rates and lags (the rates job writes here)",
    answers("RatesAck", 413, 415, 422, 503),
    body=request_body("RatesUpdate", examples.RATES_UPDATE),
    scope="write",
)
async def put_rates(
    request: Request, group: WritableGroup, groups: GroupServiceDep, operations: OperationsServiceDep
) -> Response:
    update = decode(_RATES, await read_body(request))
    response = json_response(await groups.put_rates(group, update))
    # the scaling signal (and its gauge) follows the rates, after the answer is sent
    response.background = BackgroundTask(operations.rates_stored, group)
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
