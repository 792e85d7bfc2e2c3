"""The Grafana dashboard and the Prometheus alert rules, checked offline against the service's metrics: every
expression parses (promql-parser, the PromQL grammar of Prometheus as a Rust library), names only metrics and
labels /metrics exports, and the dashboard has the shape Grafana imports (JSON schema below), panels that do not
overlap, and the variables its queries use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import promql_parser
import pytest
import yaml

from app.api.observability import GROUP_GAUGES, GroupGauges, Metrics

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "grafana" / "groupfit-dashboard.json"
ALERTS = ROOT / "deploy" / "prometheus" / "groupfit-alerts.yaml"

SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Sample name → its label names, as /metrics writes them (a histogram's buckets add `le`)."""
    samples: dict[str, set[str]] = {}
    for metric in Metrics().registry._collector_to_names:  # every metric the service registers
        if isinstance(metric, GroupGauges):  # the per-group gauges, collected from their table at each scrape
            samples.update((name, {"group"}) for name in GROUP_GAUGES)
            continue
        for suffix in SAMPLE_SUFFIXES[metric._type]:
            labels = set(metric._labelnames) | ({"le"} if suffix == "_bucket" else set())
            samples[metric._name + suffix] = labels
    return samples


def check_expression(expr: str) -> set[str]:
    """Parses, names only exported samples, aggregates only by their labels; the labels the result keeps."""
    promql_parser.parse(expr)  # raises on a syntax error
    samples = exported()
    names = set(re.findall(r"\bgroupfit_[a-z_]+\b", expr))
    assert names, f"no groupfit metric in {expr!r}"
    unknown = names - set(samples)
    assert not unknown, f"{expr!r} names metrics the service does not export: {sorted(unknown)}"
    labels = set().union(*(samples[name] for name in names))
    kept: set[str] = set()
    for group in re.findall(r"\bby \(([^)]*)\)", expr):
        by = {label.strip() for label in group.split(",") if label.strip()}
        assert by <= labels, f"{expr!r} aggregates by labels its metrics lack: {sorted(by - labels)}"
        kept = by if not kept else kept & by
    for label in re.findall(r"\{([^}]*)\}", expr):
        used = {m.split("=")[0].strip("!~ ") for m in label.split(",") if "=" in m}
        assert used <= labels, f"{expr!r} matches labels its metrics lack: {sorted(used - labels)}"
    return kept


def rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def test_alert_rules_cover_what_an_operator_must_act_on():
    names = {rule["alert"] for rule in rules()}
    assert {
        "GroupfitGroupOverloaded",
        "GroupfitStoreUnavailable",
        "GroupfitComputeDeadlineExceeded",
        "GroupfitRatesStale",
    } <= names
    for rule in rules():
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"\d+[smh]", rule["for"]) and rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
def test_alert_expressions_parse_and_name_exported_metrics(rule):
    kept = check_expression(rule["expr"])
    templated = set(re.findall(r"\$labels\.([a-z_]+)", json.dumps(rule["annotations"])))
    assert templated <= kept, f"{rule['alert']} shows labels its expression drops: {sorted(templated - kept)}"


def test_a_wrong_expression_is_caught():
    with pytest.raises(ValueError):
        promql_parser.parse("sum by (group) (rate(groupfit_store_errors_total[5m])")
    with pytest.raises(AssertionError, match="does not export"):
        check_expression("max(groupfit_group_lag)")
    with pytest.raises(AssertionError, match="lack"):
        check_expression("max by (topic) (groupfit_group_consumers)")


DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "time": {"type": "object", "required": ["from", "to"]},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {
                "list": {
                    "type": "array",
                    "items": {"type": "object", "required": ["name", "type"]},
                }
            },
        },
        "panels": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "type", "title", "gridPos", "targets", "datasource", "fieldConfig"],
                "properties": {
                    "id": {"type": "integer"},
                    "type": {"enum": ["timeseries", "stat", "gauge", "table", "bargauge"]},
                    "title": {"type": "string", "minLength": 1},
                    "gridPos": {
                        "type": "object",
                        "required": ["x", "y", "w", "h"],
                        "properties": {
                            "x": {"type": "integer", "minimum": 0, "maximum": 23},
                            "y": {"type": "integer", "minimum": 0},
                            "w": {"type": "integer", "minimum": 1, "maximum": 24},
                            "h": {"type": "integer", "minimum": 1},
                        },
                    },
                    "fieldConfig": {
                        "type": "object",
                        "required": ["defaults"],
                        "properties": {"defaults": {"type": "object", "required": ["unit"]}},
                    },
                    "targets": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "object", "required": ["refId", "expr"]},
                    },
                },
            },
        },
    },
}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_dashboard_has_the_shape_grafana_imports():
    board = dashboard()
    jsonschema.validate(board, DASHBOARD_SCHEMA)
    panels = board["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[x, y]}"
                cells[x, y] = panel["title"]
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    variables = {v["name"] for v in board["templating"]["list"]}
    used = set(re.findall(r"\$\{?([a-z_]+)\}?", json.dumps(panels))) - {"__all"}
    assert used <= variables, f"undefined dashboard variables: {sorted(used - variables)}"


@pytest.mark.parametrize("expr", [t["expr"] for p in dashboard()["panels"] for t in p["targets"]], ids=lambda e: e[:60])
def test_dashboard_queries_parse_and_name_exported_metrics(expr):
    check_expression(expr)


def test_dashboard_shows_every_per_group_metric():
    queried = " ".join(t["expr"] for p in dashboard()["panels"] for t in p["targets"])
    for name in GROUP_GAUGES:
        assert name in queried, name
