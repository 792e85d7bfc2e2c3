"""Window arithmetic of the rates job on a static DataFrame (a real local Spark session)."""

from __future__ import annotations

import datetime as dt

import pytest

from app.pipeline.job import RateBook, windowed_bytes

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_sliding_windows_sum_bytes_per_partition(spark):
    rows = [("t", 0, i, T0 + dt.timedelta(seconds=i), 100) for i in range(20)]  # 100 B/s on t/0
    rows += [("t", 1, i, T0 + dt.timedelta(seconds=2 * i), 50) for i in range(10)]  # 25 B/s on t/1
    frame = spark.createDataFrame(rows, "topic string, partition int, offset long, timestamp timestamp, size long")
    windows = {
        (r["topic"], r["partition"], r["window_start"].replace(tzinfo=dt.UTC)): r["bytes"]
        for r in windowed_bytes(frame, 10, 5).collect()
    }
    assert windows["t", 0, T0] == 1000  # seconds 0..9
    assert windows["t", 0, T0 + dt.timedelta(seconds=5)] == 1000  # seconds 5..14
    assert windows["t", 0, T0 + dt.timedelta(seconds=15)] == 500  # seconds 15..19
    assert windows["t", 1, T0] == 250  # records at 0, 2, 4, 6, 8


def test_rate_book_reports_the_latest_complete_window():
    book = RateBook(window_s=10)
    end = T0 + dt.timedelta(seconds=10)
    later = T0 + dt.timedelta(seconds=15)
    book.update(
        [
            {"topic": "t", "partition": 0, "window_end": end.replace(tzinfo=None), "bytes": 1000},
            {"topic": "t", "partition": 0, "window_end": later, "bytes": 400},
        ]
    )
    rates, window_end = book.rates(T0 + dt.timedelta(seconds=12), [("t", 0), ("t", 1)])
    assert window_end == end and rates == {("t", 0): 100.0, ("t", 1): 0.0}
    rates, window_end = book.rates(T0 + dt.timedelta(seconds=16), [("t", 0)])
    assert window_end == later and rates == {("t", 0): pytest.approx(40.0)}
    assert book.rates(T0, [("t", 0)]) == ({}, None)
