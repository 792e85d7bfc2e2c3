"""The autoscaler's loop (groupfit_client/autoscaler.py) with a fake fleet, fake offsets and a fake service: what it
reads, stores, decides and starts or stops each interval, and what it writes to the events log."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from groupfit_client.autoscaler import (
    AutoscaleError,
    Autoscaler,
    Fleet,
    Sample,
    Settings,
    lags_of,
    linear,
    main,
    rates_between,
)
from groupfit_client.controller.processes import ConsumerProcesses
from groupfit_client.errors import GroupfitError
from groupfit_client.results import PartitionRate, ScaleSignal

CONTRACT = {
    "t",
    "strategy",
    "rates",
    "lags",
    "total_rate",
    "action",
    "reason",
    "consumers_before",
    "consumers_after",
    "started",
    "stopped",
}


class FakeOffsets:
    """A topic of `partitions` whose end offsets grow by the rates set, and a group that commits what it is told."""

    def __init__(self, partitions: int = 4) -> None:
        self.t = 0.0
        self.end = dict.fromkeys(range(partitions), 0)
        self.committed: dict[int, int | None] = dict.fromkeys(range(partitions))
        self.rates = dict.fromkeys(range(partitions), 0.0)
        self.group_members: int | None = None

    def advance(self, seconds: float = 1.0) -> None:
        self.t += seconds
        for p, rate in self.rates.items():
            self.end[p] += round(rate * seconds)

    def sample(self) -> Sample:
        return Sample(self.t, dict(self.end), dict(self.committed))

    def start_offsets(self) -> dict[int, int]:
        return dict.fromkeys(self.end, 0)

    def members(self) -> int | None:
        return self.group_members


class FakeProcesses(ConsumerProcesses):
    def __init__(self) -> None:
        self.alive: set[str] = set()
        self.created: list[str] = []
        self.deleted: list[str] = []

    def create(self, consumer_id: str) -> None:
        self.alive.add(consumer_id)
        self.created.append(consumer_id)

    def delete(self, consumer_id: str) -> None:
        self.alive.discard(consumer_id)
        self.deleted.append(consumer_id)

    def running(self) -> list[str]:
        return sorted(self.alive)


def signal_of(action: str, needed: int, current: int, remove: list[str] | None = None) -> ScaleSignal:
    doc = {
        "group": "g",
        "algorithm": "mwf",
        "capacity": 200.0,
        "needed": needed,
        "current": current,
        "lower_bound": 1,
        "total_rate": 0.0,
        "overloaded": [],
        "action": action,
        "reason": f"the service says {action}",
        "rates_window_end": "2026-11-25T10:00:00+00:00",
        "unowned": 0,
        "remove": remove or [],
        "rscore": None,
        "moves": None,
        "gain": None,
    }
    return ScaleSignal.from_json(doc)


class FakeService:
    def __init__(self) -> None:
        self.stored: list[tuple[str, list[PartitionRate], object]] = []
        self.queries: list[dict] = []
        self.answer: ScaleSignal | GroupfitError = signal_of("none", 1, 1)

    def put_rates(self, group, partitions, window_end):
        self.stored.append((group, list(partitions), window_end))

    def scale(self, group, **query):
        self.queries.append(query)
        if isinstance(self.answer, GroupfitError):
            raise self.answer
        return self.answer


def settings(strategy: str = "linear", **given) -> Settings:
    base = {
        "bootstrap_servers": "b:9092",
        "topic": "t",
        "group": "g",
        "strategy": strategy,
        "consumer_command": ["consume", "--id", "{id}"],
        "events_log": "-",
        "service_url": "http://groupfit" if strategy not in ("linear", "fixed") else None,
        "settle_timeout_s": 10.0,
    }
    return Settings(**{**base, **given})


class Harness:
    def __init__(self, s: Settings, service: FakeService | None = None) -> None:
        self.offsets, self.processes, self.events = FakeOffsets(), FakeProcesses(), io.StringIO()
        self.service = service
        self.scaler = Autoscaler(
            s,
            self.offsets,
            Fleet(self.processes),
            service,
            self.events,
            clock=lambda: self.offsets.t,
            wall=lambda: 1e9 + self.offsets.t,
        )
        self.scaler.last = self.offsets.sample()

    def step(self, seconds: float = 1.0, **rates: float) -> dict:
        for p, rate in rates.items():
            self.offsets.rates[int(p[1:])] = rate
        self.offsets.advance(seconds)
        return self.scaler.step()

    def settle(self) -> None:
        self.offsets.group_members = len(self.processes.alive)

    def logged(self) -> list[dict]:
        return [json.loads(line) for line in self.events.getvalue().splitlines()]


def test_linear_scales_up_waits_for_the_group_then_down_newest_first():
    h = Harness(settings("linear", mu=200, f_up=0.9, f_down=0.4))
    first = h.step(p0=125, p1=125, p2=125, p3=125)  # 500 events/s
    assert (first["action"], first["started"], first["consumers_after"]) == ("up", ["c0"], 1)
    assert "bootstrap" in first["reason"]
    waiting = h.step()
    assert waiting["action"] == "none" and "settle" in waiting["reason"] and waiting["started"] == []
    h.settle()
    up = h.step()
    assert (up["action"], up["started"], up["consumers_before"], up["consumers_after"]) == ("up", ["c1", "c2"], 1, 3)
    assert up["reason"].startswith("⌈Σ rate 500 / (μ·f_up = 180)⌉ = 3")
    h.settle()
    band = h.step()  # down only when 500 fits consumers of 80: never at 3
    assert band["action"] == "none" and band["consumers_after"] == 3
    down = h.step(p0=10, p1=10, p2=10, p3=10)  # 40 events/s: ⌈40 / 80⌉ = 1
    assert (down["action"], down["stopped"], down["consumers_after"]) == ("down", ["c2", "c1"], 1)
    assert h.processes.deleted == ["c2", "c1"]
    events = h.logged()
    assert len(events) == 5 and all(set(e) >= CONTRACT for e in events)
    assert events[2]["rates"] == {"0": 125.0, "1": 125.0, "2": 125.0, "3": 125.0} and events[2]["total_rate"] == 500
    assert events[0]["t"] == 1e9 + 1 and events[0]["strategy"] == "linear"


def test_it_acts_again_after_the_settle_timeout_when_the_group_never_settles():
    h = Harness(settings("linear", settle_timeout_s=5))
    h.step(p0=500)
    assert h.step(seconds=4.0, p0=500)["action"] == "none"
    assert h.step(seconds=2.0, p0=500)["started"] == ["c1", "c2"]


def test_lags_come_from_the_committed_offsets_or_the_log_start():
    before = Sample(10.0, {0: 100, 1: 50}, {0: None, 1: None})
    after = Sample(12.0, {0: 300, 1: 50}, {0: 250, 1: None})
    assert rates_between(before, after) == {0: 100.0, 1: 0.0}
    assert lags_of(after, {0: 0, 1: 20}) == {0: 50, 1: 30}


def test_linear_rule():
    assert linear(500, 1, 200, 0.9, 0.4).target == 3
    assert linear(500, 3, 200, 0.9, 0.4).action == "none"
    assert (linear(100, 3, 200, 0.9, 0.4).action, linear(100, 3, 200, 0.9, 0.4).target) == ("down", 2)
    assert linear(0, 2, 200, 0.9, 0.4).target == 1


def test_a_groupfit_strategy_stores_the_rates_and_follows_the_services_decision():
    service = FakeService()
    h = Harness(settings("least-loaded", params={"rebalance_s": 0.2}, w_sla=0.5), service)
    service.answer = GroupfitError(404, "group_not_found", "no stored assignment")
    first = h.step(p0=100, p1=100)
    assert first["started"] == ["c0"] and first["action"] == "up"
    h.offsets.committed[0] = h.offsets.end[0] - 30
    h.settle()
    no_state = h.step()
    assert no_state["action"] == "none" and "no stored assignment" in no_state["reason"]
    group, partitions, window_end = service.stored[-1]
    assert group == "g" and window_end.tzinfo is not None
    # p0 committed 30 behind, then 100 more arrived; p1 never committed: its lag runs from the log start
    assert partitions[:2] == [PartitionRate("t", 0, 100.0, 130.0), PartitionRate("t", 1, 100.0, 200.0)]
    query = service.queries[-1]
    assert query["algorithm"] == "least-loaded" and (query["f_up"], query["f_down"]) == (0.9, 0.4)
    assert query["params"] == {"mu": 200.0, "w_sla": 0.5, "rebalance_s": 0.2}  # --params overrides
    service.answer = signal_of("up", 3, 1)
    assert h.step()["started"] == ["c1", "c2"]
    h.settle()
    service.answer = signal_of("reass", 3, 3)
    reass = h.step()
    assert reass["action"] == "reass" and reass["started"] == reass["stopped"] == []  # the leader's to act on
    service.answer = signal_of("down", 1, 3, remove=["c0", "c1"])
    down = h.step()
    assert down["stopped"] == ["c0", "c1"] and h.processes.running() == ["c2"]
    h.settle()
    service.answer = signal_of("up", 2, 1)
    assert h.step()["started"] == ["c0"]  # the lowest free identity


def test_targets_stay_within_the_bounds_and_fixed_replaces_a_dead_consumer():
    service = FakeService()
    h = Harness(settings("mwf", min_consumers=2, max_consumers=3), service)
    assert h.step(p0=1)["started"] == ["c0", "c1"]  # bootstrap at --min-consumers
    h.settle()
    service.answer = signal_of("up", 9, 2)
    capped = h.step()
    assert capped["started"] == ["c2"] and capped["consumers_after"] == 3
    h.settle()
    service.answer = signal_of("down", 1, 3)
    assert h.step()["consumers_after"] == 2
    assert Harness(settings("linear", consumers=2)).step(p0=1)["started"] == ["c0", "c1"]  # the count to start with
    fixed = Harness(settings("fixed", consumers=3))
    assert fixed.step()["started"] == ["c0", "c1", "c2"]
    fixed.processes.alive.discard("c1")  # died
    again = fixed.step()
    assert (again["consumers_before"], again["started"]) == (2, ["c1"])


def test_a_stopping_consumers_identity_is_not_reused_until_it_exits():
    processes = FakeProcesses()
    fleet = Fleet(processes)
    assert fleet.start(2, []) == ["c0", "c1"]
    assert fleet.stop(1) == ["c1"]
    assert fleet.start(1, busy=["c1"]) == ["c2"]
    assert fleet.running() == ["c0", "c2"]


def test_a_failed_read_is_an_interval_without_action():
    h = Harness(settings("linear"))
    h.offsets.sample = lambda: (_ for _ in ()).throw(RuntimeError("broker gone"))  # type: ignore[method-assign]
    event = h.step()
    assert event["action"] == "none" and "broker gone" in event["reason"] and event["rates"] == {}


def test_run_steps_each_interval_until_stopped():
    offsets, events, stop = FakeOffsets(), io.StringIO(), threading.Event()
    calls = []

    def sample() -> Sample:
        calls.append(1)
        if len(calls) == 3:
            stop.set()
        offsets.advance()
        return Sample(offsets.t, dict(offsets.end), dict(offsets.committed))

    offsets.sample = sample  # type: ignore[method-assign]
    scaler = Autoscaler(settings("linear", interval_s=0.001), offsets, Fleet(FakeProcesses()), None, events)
    scaler.run(stop)
    assert len(events.getvalue().splitlines()) == 2  # the first sample is the baseline


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"strategy": "mwf", "service_url": None}, "names a groupfit algorithm: give --service-url"),
        ({"strategy": "fixed"}, "needs --consumers"),
        ({"consumer_command": ["consume"]}, "must contain {id}"),
        ({"f_up": 0.4, "f_down": 0.5}, "f_down < f_up"),
        ({"min_consumers": 3, "max_consumers": 2}, "--min-consumers"),
    ],
)
def test_bad_settings_are_refused_with_a_sentence(given, words):
    with pytest.raises(AutoscaleError, match=words.replace("{", r"\{").replace("}", r"\}").replace("(", r"\(")):
        settings(**given).check()


def test_the_command_refuses_bad_input_and_starts_nothing(tmp_path: Path, capsys):
    marker = tmp_path / "started-{id}"
    common = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--group", "g", "--events-log", str(tmp_path / "e")]
    command = ["--consumer-command", f"touch {marker}"]
    assert main([*common, *command, "--strategy", "mwf"]) == 2
    assert "give --service-url" in capsys.readouterr().err
    assert main([*common, *command, "--strategy", "mwf", "--service-url", "http://127.0.0.1:1"]) == 2
    assert "no groupfit service answered at http://127.0.0.1:1" in capsys.readouterr().err
    assert main([*common, *command, "--strategy", "linear", "--params", "[]"]) == 2
    assert "--params must be a JSON object" in capsys.readouterr().err
    assert main([*common, *command, "--strategy", "linear"]) == 2  # no broker there
    assert "no Kafka broker answered at 127.0.0.1:1" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
