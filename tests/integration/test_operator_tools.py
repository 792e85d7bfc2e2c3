"""Operator tools against a live service: `groupfit report --group G --url …` (the group's stored rates
history replayed into the report, the same figures as GET /v1/groups/{g}/replay), and the line the service
logs when it is ready."""

from __future__ import annotations

import json
import uuid

import httpx

from app.cli import main

RATES = [[40, 30, 20, 50, 60, 10], [45, 35, 25, 50, 60, 30], [90, 35, 25, 70, 60, 30], [60, 10, 25, 70, 20, 30]]


def seed(url: str, group: str) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        for i, rates in enumerate(RATES):
            body = {
                "partitions": [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate(rates)],
                "window_end": f"2026-11-25T09:00:{10 * i:02d}Z",  # 10 s apart
            }
            client.put(f"/v1/groups/{group}/rates", json=body).raise_for_status()
            if i == 0:
                assign = {"algorithm": "mwf", "group": group, "capacity": 120}
                client.post("/v1/assign", json=assign).raise_for_status()


def test_report_of_a_groups_own_history(live_service, tmp_path, capsys):
    group = f"report-{uuid.uuid4().hex[:6]}"
    seed(live_service.url, group)
    out = tmp_path / "report"
    argv = ["report", "--group", group, "--url", live_service.url, "--out", str(out), "--algorithms", "mwf,bfd"]
    assert main(argv) == 0
    assert f"4 windows of {group}" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())["results"]
    replay = httpx.get(f"{live_service.url}/v1/groups/{group}/replay?algorithms=mwf,bfd", timeout=30).json()
    assert replay["capacity"] == 120 and replay["iteration_s"] == 10
    for name in ("mwf", "bfd"):
        assert results[name]["consumers"] == replay["results"][name]["consumers"]
        assert results[name]["rscore"] == replay["results"][name]["rscore"]
        assert results[name]["latency"]["p99"] == replay["results"][name]["latency"]["p99"]
    assert (out / "index.html").read_text().count("<img") >= 3


def test_report_of_an_unknown_group_says_so(live_service, tmp_path, capsys):
    argv = ["report", "--group", "nobody-here", "--url", live_service.url, "--out", str(tmp_path)]
    assert main(argv) == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert error["code"] == "group_not_found" and "404" in error["message"]


def test_report_without_a_service(tmp_path, capsys):
    argv = ["report", "--group", "g", "--url", "http://127.0.0.1:9", "--out", str(tmp_path)]
    assert main(argv) == 2
    assert "cannot reach the service" in capsys.readouterr().err


def test_the_service_says_where_it_listens_once_ready(live_service):
    lines = [json.loads(line) for line in live_service.log_path.read_text().splitlines() if line.startswith("{")]
    ready = [line for line in lines if line["message"] == "ready"]
    assert len(ready) == 1 and ready[0]["url"] == live_service.url and ready[0]["ui"] == f"{live_service.url}/ui"
