"""A group's stored rates history, read from a running service, as a stream for `groupfit report --group`:
the paper's evaluation (§VI) on the group's own traffic."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

import httpx

from app.codec.evaluate import Measurement
from app.core.errors import AssignmentError, ErrorCode, GroupfitError

SINGLE_WINDOW_S = 30.0  # one window: the paper's iteration (§VI-C)


@dataclass
class GroupHistory:
    stream: list[Measurement]
    window_ends: list[str]
    capacity: float
    iteration_s: float  # the median time between the windows' ends


def fetch_history(url: str, group: str, token: str | None, windows: int) -> GroupHistory:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = f"{url.rstrip('/')}/v1/groups/{quote(group, safe='')}"
    with httpx.Client(headers=headers, timeout=30) as client:
        state = _get(client, base)
        history = _get(client, f"{base}/rates/history", {"limit": windows})
    stream: list[Measurement] = []
    for window in history["windows"]:
        measurement: Measurement = {}
        for p in window["partitions"]:
            measurement.setdefault(p["topic"], {})[str(p["partition"])] = p["rate"]
        stream.append(measurement)
    ends = [w["window_end"] for w in history["windows"]]
    return GroupHistory(stream, ends, state["capacity"], cadence(ends))


def cadence(window_ends: list[str]) -> float:
    """Seconds between windows: the median gap between their ends (one window: the paper's iteration)."""
    times = [datetime.fromisoformat(end).timestamp() for end in window_ends]
    gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
    return statistics.median(gaps) if gaps else SINGLE_WINDOW_S


def _get(client: httpx.Client, url: str, params: dict | None = None) -> dict:
    try:
        answer = client.get(url, params=params)
    except httpx.HTTPError as exc:
        raise AssignmentError(ErrorCode.INVALID_REQUEST, f"cannot reach the service at {url}: {exc}.") from None
    if answer.status_code != 200:
        try:
            error = answer.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = {"code": ErrorCode.INVALID_REQUEST.value, "message": f"{url} answered {answer.status_code}."}
        known = error["code"] in ErrorCode._value2member_map_
        code = ErrorCode(error["code"]) if known else ErrorCode.INVALID_REQUEST
        raise GroupfitError(code, f"the service answered {answer.status_code}: {error['message']}")
    return answer.json()
