"""The examples in openapi/openapi.json: real requests and the service's real answers to them (the API
tests send each request and compare), so a generated client's documentation never shows a made-up body."""

from __future__ import annotations

from typing import Any

ASSIGN_REQUEST: dict[str, Any] = {
    "algorithm": "mwf",
    "capacity": 100,
    "partitions": [
        {"topic": "t", "partition": 0, "rate": 100},
        {"topic": "t", "partition": 1, "rate": 100},
        {"topic": "t", "partition": 2, "rate": 100},
        {"topic": "t", "partition": 3, "rate": 150},
    ],
    "previous": {
        "a": [{"topic": "t", "partition": 0}],
        "b": [{"topic": "t", "partition": 1}, {"topic": "t", "partition": 2}],
    },
}

ASSIGN_ANSWER: dict[str, Any] = {
    "algorithm": "mwf",
    "capacity": 100.0,
    "assignment": {
        "a": [{"topic": "t", "partition": 0}],
        "b": [{"topic": "t", "partition": 1}],
        "c0": [{"topic": "t", "partition": 3}],
        "c1": [{"topic": "t", "partition": 2}],
    },
    "consumers": [
        {"id": "a", "load": 100.0, "utilization": 1.0, "partition_count": 1},
        {"id": "b", "load": 100.0, "utilization": 1.0, "partition_count": 1},
        {"id": "c0", "load": 150.0, "utilization": 1.5, "partition_count": 1},
        {"id": "c1", "load": 100.0, "utilization": 1.0, "partition_count": 1},
    ],
    "moves": [{"topic": "t", "partition": 2, "from": "b", "to": "c1", "rate": 100.0}],
    "delta": {
        "rows": ["b", "c0", "c1"],
        "columns": [{"topic": "t", "partition": 2}, {"topic": "t", "partition": 3}],
        "cells": [[0, 0, -1], [2, 0, 1], [1, 1, 1]],
    },
    "rscore": 1.0,
    "consumer_count": 4,
    "lower_bound": 5,
    "overloaded_partitions": [{"topic": "t", "partition": 3, "rate": 150.0, "consumer": "c0"}],
    "overloaded_members": [],
    "recommended_consumers": None,
    "outputs": {},
    "group": None,
    "version": None,
}

DUPLICATE_PARTITION_REQUEST: dict[str, Any] = {
    **ASSIGN_REQUEST,
    "partitions": [*ASSIGN_REQUEST["partitions"], {"topic": "t", "partition": 0, "rate": 5}],
}

DUPLICATE_PARTITION_ERROR: dict[str, Any] = {
    "error": {
        "code": "duplicate_partition",
        "message": "partition t/0 is listed more than once; list each partition once.",
        "details": {"partition": {"topic": "t", "partition": 0}},
    }
}

VERSION_CONFLICT_ERROR: dict[str, Any] = {
    "error": {
        "code": "version_conflict",
        "message": "group 'orders' is at version 3, not 2; read it again and retry with expected_version=3.",
        "details": {"current_version": 3, "expected_version": 2},
    }
}

RATES_UPDATE: dict[str, Any] = {
    "partitions": [
        {"topic": "t", "partition": 0, "rate": 812.5, "lag": 120},
        {"topic": "t", "partition": 1, "rate": 64.0},
    ],
    "window_end": "2026-11-22T10:00:00Z",
}

PLACEMENT_REQUEST: dict[str, Any] = {
    "solver": "exact",
    "brokers": [
        {"id": 1, "rack": "a", "disk": 1000, "network": 10},
        {"id": 2, "rack": "b", "disk": 1000, "network": 10},
        {"id": 3, "rack": "c", "disk": 1000, "network": 10},
    ],
    "topics": [{"name": "orders", "retention_ms": 100000}],
    "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2], "size": 400},
        {"topic": "orders", "partition": 1, "replicas": [1, 2], "size": 400},
        {"topic": "orders", "partition": 2, "replicas": [1, 3], "size": 300},
    ],
    "options": {"objective": "moves"},
}
