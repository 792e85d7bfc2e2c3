"""The console in a real browser: Debian's Chromium, headless, driven by Playwright (its own browser builds
cannot be downloaded here, so `executable_path`), against a live service with Redis. A screenshot of every
page goes to test-output/browser/ (GROUPFIT_TEST_OUTPUT changes the folder)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import LiveService

# A name a careless page would run as HTML (a group name may hold < > & = ( ), not spaces or '/').
GROUP = "orders<img&src=x&onerror=alert(1)>"
TOPIC = "t&<b>"
WINDOWS = [[40, 30, 20, 50, 60, 10], [45, 35, 25, 50, 60, 30], [90, 35, 25, 70, 60, 30]]
OUTPUT = Path(os.environ.get("GROUPFIT_TEST_OUTPUT", "test-output")) / "browser"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run does it)")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser context; the test fails on a script error, a console error, an alert, or a request to
    another host."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))

    def console(message) -> None:
        """A refused load (Content-Security-Policy, a missing asset) is a console error; so is the API's refusal
        of what the page asks, which the page shows (a group without stored rates: …/rates 404, …/scale 422), so
        that one is left out unless it is the server's fault (5xx)."""
        if message.type != "error":
            return
        refused = urlsplit(message.location.get("url", "")).path.startswith("/v1/") and "status of 4" in message.text
        if not (message.text.startswith("Failed to load resource") and refused):
            problems.append(f"console: {message.text}")

    opened.on("console", console)
    opened.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))

    def outside(request) -> None:
        host = urlsplit(request.url).hostname
        if request.url.startswith(("http:", "https:", "ws:")) and host not in ("127.0.0.1", "localhost"):
            problems.append(f"request to another host: {request.url}")

    opened.on("request", outside)
    yield opened
    context.close()
    assert problems == []


@pytest.fixture(scope="module")
def seeded(live_service: LiveService) -> LiveService:
    """Three rates windows 30 s apart; mwf's assignment from the first two, then rates that overload it."""
    path = f"{live_service.url}/v1/groups/{quote(GROUP, safe='')}"
    with httpx.Client(timeout=10) as client:
        for i, rates in enumerate(WINDOWS):
            body = {
                "partitions": [{"topic": TOPIC, "partition": p, "rate": r, "lag": 3} for p, r in enumerate(rates)],
                "window_end": f"2026-11-25T08:0{i // 2}:{30 * (i % 2):02d}Z",
            }
            client.put(f"{path}/rates", json=body).raise_for_status()
            if i < 2:
                assign = {"algorithm": "mwf", "group": GROUP, **({"capacity": 100} if i == 0 else {})}
                client.post(f"{live_service.url}/v1/assign", json=assign).raise_for_status()
    return live_service


def shot(page: Page, name: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=OUTPUT / f"{name}.png", full_page=True)


def test_groups_page_lists_and_filters(seeded, page):
    page.goto(f"{seeded.url}/ui")
    link = page.get_by_role("link", name=GROUP, exact=True)
    expect(link).to_be_visible()
    assert page.locator("main img").count() == 0  # the name was shown as text, not parsed as HTML
    page.fill("#filter", "no-such-group")
    expect(page.locator("#groups tbody tr")).to_have_count(0)
    page.fill("#filter", "ORDERS<IMG")
    expect(page.locator("#groups tbody tr")).to_have_count(1)
    shot(page, "groups")


def test_group_page_marks_the_overloaded_consumer(seeded, page):
    scale = httpx.get(f"{seeded.url}/v1/groups/{quote(GROUP, safe='')}/scale", timeout=10).json()
    assert scale["overloaded"], "the seeded rates overload a consumer"
    page.goto(f"{seeded.url}/ui#/group/{quote(GROUP, safe='')}")
    expect(page.locator("h1")).to_have_text(GROUP)
    overloaded = page.locator(".consumer.overloaded")
    expect(overloaded).to_have_count(len(scale["overloaded"]))
    assert [overloaded.nth(i).get_attribute("data-consumer") for i in range(overloaded.count())] == scale["overloaded"]
    expect(overloaded.first.locator(".badge.overloaded")).to_have_text("overloaded")
    expect(page.locator(".consumer:not(.overloaded)")).to_have_count(scale["current"] - len(scale["overloaded"]))
    expect(page.locator("#loads-source")).to_have_attribute("data-source", "rates")
    expect(page.locator("#scale")).to_contain_text(f"needs {scale['needed']}, has {scale['current']}")
    expect(page.locator("#history canvas")).to_have_count(3)  # consumers, Rscore, moved rate per version
    expect(page.locator("#rates tbody tr")).to_have_count(len(WINDOWS[-1]))
    expect(page.locator("#rates")).to_contain_text(f"{TOPIC}/0")
    assert page.locator("main img, main b").count() == 0
    shot(page, "group")


def test_group_page_shows_the_last_answers_loads_without_stored_rates(live_service, page):
    """A group whose rates come in the request (a leader's): each consumer's load as the last answer gave it,
    and the page says so."""
    group = "answered"
    with httpx.Client(base_url=live_service.url, timeout=10) as client:
        for rates in (WINDOWS[0], WINDOWS[2]):
            partitions = [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate(rates)]
            body = {"algorithm": "mwf", "group": group, "capacity": 100, "partitions": partitions}
            answer = client.post("/v1/assign", json=body).raise_for_status().json()
    page.goto(f"{live_service.url}/ui#/group/{group}")
    source = page.locator("#loads-source")
    expect(source).to_have_text(f"No stored rates: loads as the last answer gave them (version {answer['version']}).")
    expect(source).to_have_attribute("data-source", "answer")
    expect(page.locator(".consumer")).to_have_count(len(answer["consumers"]))
    for consumer in answer["consumers"]:
        load = consumer["load"]
        shown = str(int(load)) if load == int(load) else f"{load:.2f}"  # as the console's fmt writes it
        expect(page.locator(f'.consumer[data-consumer="{consumer["id"]}"]')).to_contain_text(f"{shown} / 100 (")
    assert sum(c["load"] for c in answer["consumers"]) == sum(WINDOWS[2]) > 0
    shot(page, "group-answered")


def test_group_page_shows_the_last_rebalances_moves_and_delta(live_service, page):
    group = "moving"
    with httpx.Client(base_url=live_service.url, timeout=10) as client:
        for algorithm, rates in (("mwf", WINDOWS[0]), ("bfd", WINDOWS[2])):
            body = {"partitions": [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate(rates)]}
            client.put(f"/v1/groups/{group}/rates", json={**body, "window_end": "2026-11-25T08:00:00Z"})
            client.post("/v1/assign", json={"algorithm": algorithm, "group": group, "capacity": 100}).raise_for_status()
        moves = client.get(f"/v1/groups/{group}/history").json()["versions"][0]["moves"]
    assert moves, "bfd re-packs the new rates: partitions move"
    page.goto(f"{live_service.url}/ui#/group/{group}")
    section = page.locator("#last-rebalance")
    expect(section.locator("table").first.locator("tbody tr")).to_have_count(len(moves))
    expect(section.locator(".delta td.minus")).to_have_count(len(moves))  # each move: −1 where it leaves
    expect(section.locator(".delta td.plus")).to_have_count(len(moves))  # and +1 where it arrives
    shot(page, "group-moves")


def test_group_page_shows_each_consumers_rack_and_the_cross_zone_rate(live_service, page):
    group = "zoned"
    racks = ("eu-1a", "eu-1b", "eu-1c")
    with httpx.Client(base_url=live_service.url, timeout=10) as client:
        for rates in ([60, 60, 60, 30], [60, 60, 60, 50]):  # t/3 (eu-1a) no longer fits beside t/0 in eu-1a
            body = {
                "partitions": [
                    {"topic": "t", "partition": p, "rate": r, "racks": [racks[p % 3]]} for p, r in enumerate(rates)
                ]
            }
            client.put(
                f"/v1/groups/{group}/rates", json={**body, "window_end": "2026-11-25T08:00:00Z"}
            ).raise_for_status()
            client.post("/v1/assign", json={"algorithm": "mwf", "group": group, "capacity": 100}).raise_for_status()
        state = client.get(f"/v1/groups/{group}").json()
        last = client.get(f"/v1/groups/{group}/history").json()["versions"][0]
    page.goto(f"{live_service.url}/ui#/group/{group}")
    names = page.locator(".consumer .name")
    expect(names).to_have_count(len(state["assignment"]))
    assert sorted(names.all_inner_texts()) == sorted(f"{c} · {state['racks'][c]}" for c in state["assignment"])
    expect(page.locator("#last-rebalance .facts")).to_contain_text(f"cross-zone rate{last['cross_zone_rate']:g}")
    expect(page.locator("#history canvas")).to_have_count(4)  # and the cross-zone rate per version
    shot(page, "group-zones")


def test_what_if_runs_the_registrys_algorithms(seeded, page):
    """The what-if offers every algorithm of GET /v1/algorithms and runs, unless unchecked, those whose every
    parameter has a stated default (the rest want more than a group stores); each row is that algorithm's dry run."""
    registry = httpx.get(f"{seeded.url}/v1/algorithms", timeout=10).json()["algorithms"]
    complete = [a for a in registry if all("default" in p for p in a["params"].get("properties", {}).values())]
    expected = [a["name"] for a in complete]
    assert 10 < len(expected) < len(registry) and "mwf" in expected, expected
    page.goto(f"{seeded.url}/ui#/whatif/{quote(GROUP, safe='')}")
    expect(page.locator("#whatif[data-complete=true]")).to_have_count(1, timeout=60_000)
    boxes = page.locator(".toolbar input[type=checkbox]")
    expect(boxes).to_have_count(len(registry))
    assert [boxes.nth(i).get_attribute("value") for i in range(boxes.count())] == [a["name"] for a in registry]
    assert [boxes.nth(i).get_attribute("value") for i in range(boxes.count()) if boxes.nth(i).is_checked()] == expected
    rows = page.locator("#whatif tbody tr")
    expect(rows).to_have_count(len(expected))
    assert [rows.nth(i).get_attribute("data-algorithm") for i in range(rows.count())] == expected
    marked = 0
    for name in expected:  # each row is that algorithm's dry run, its overloaded consumers marked
        dry = httpx.post(
            f"{seeded.url}/v1/assign", json={"algorithm": name, "group": GROUP, "dry_run": True}, timeout=10
        ).json()
        row = page.locator(f"#whatif tbody tr[data-algorithm={name}]")
        assert row.get_attribute("data-done") == "ok", name
        cells = row.locator("td")
        assert cells.nth(1).text_content() == str(dry["consumer_count"]), name
        assert cells.nth(3).text_content() == str(len(dry["moves"])), name
        overloaded = [c["id"] for c in dry["consumers"] if c["utilization"] > 1 + 1e-9]
        badge = cells.nth(5).locator(".badge.overloaded")
        if overloaded:
            expect(badge).to_have_text(f"{len(overloaded)}: {', '.join(overloaded)}")
            marked += 1
        else:
            expect(badge).to_have_count(0)
    assert marked, "the seeded rates overload a consumer of at least one algorithm (linear ignores capacity)"
    shot(page, "what-if")


def test_replay_page_shows_each_algorithm(seeded, page):
    page.goto(f"{seeded.url}/ui#/replay/{quote(GROUP, safe='')}")
    expect(page.locator("#replay-table tbody tr")).to_have_count(3, timeout=30_000)  # mwf, bfd, repack
    expect(page.locator("#replay")).to_contain_text("3 windows")
    expect(page.locator("#replay canvas")).to_have_count(2)
    shot(page, "replay")


@pytest.mark.parametrize(("name", "ready"), [("docs", ".swagger-ui .opblock"), ("redoc", "[role=menuitem]")])
def test_api_docs_render_offline(seeded, page, name, ready):
    page.goto(f"{seeded.url}/{name}")
    expect(page.locator(ready).first).to_be_visible(timeout=30_000)
    expect(page.get_by_text("/v1/groups/{group}/scale").first).to_be_attached()
    shot(page, name)


def test_token_field_is_kept_for_the_session(redis_server, tmp_path, browser):
    tokens = json.dumps([{"token": "s3cret", "write": False}])
    service = LiveService(redis_server.url, tmp_path / "service.log", GROUPFIT_AUTH_TOKENS=tokens).start()
    context = browser.new_context()  # its own: the first load is refused (401) on purpose
    page = context.new_page()
    try:
        page.goto(f"{service.url}/ui")
        expect(page.locator("[role=alert]")).to_contain_text("unauthorized")
        page.fill("#token", "s3cret")
        page.click("#token-form button")
        expect(page.locator("#groups")).to_be_visible()
        expect(page.locator("[role=alert]")).to_have_count(0)
        page.reload()
        expect(page.locator("#token")).to_have_value("s3cret")
        expect(page.locator("[role=alert]")).to_have_count(0)
        assert page.evaluate("localStorage.length") == 0  # the session's storage only
    finally:
        context.close()
        service.stop()
