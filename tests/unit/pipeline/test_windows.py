"""Window arithmetic of the rates job on a static DataFrame (a real local Spark session)."""

from __future__ import annotations

import datetime as dt

import pytest

from app.pipeline.job import RateBook, windowed_bytes
from app.pipeline.logdirs import LogSizeBook

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


def test_rate_book_reports_only_windows_ending_after_the_driver_started():
    """A restarted driver is sent a window again only where new records update it: an older window would lack
    the partitions read before the restart, so it is not reported."""
    book = RateBook(window_s=10)
    started = T0 + dt.timedelta(seconds=11)
    old, new = T0 + dt.timedelta(seconds=10), T0 + dt.timedelta(seconds=12)
    book.update([{"topic": "t", "partition": 0, "window_end": old, "bytes": 1000}])
    assert book.rates(T0 + dt.timedelta(seconds=11), [("t", 0), ("t", 1)], after=started) == ({}, None)
    book.update([{"topic": "t", "partition": p, "window_end": new, "bytes": 500} for p in (0, 1)])
    rates, window_end = book.rates(T0 + dt.timedelta(seconds=13), [("t", 0), ("t", 1)], after=started)
    assert window_end == new and rates == {("t", 0): 50.0, ("t", 1): 50.0}


def test_log_size_book_rates_are_size_deltas_over_the_window():
    """Landau et al. §V-A: samples older than the window leave the queue; the rate is (newest − oldest size) over
    (newest − oldest time)."""
    book = LogSizeBook(window_s=10)
    book.add(0.0, {("t", 0): 0, ("t", 1): 500})
    assert book.rates() == {}  # one sample: no rate yet
    book.add(5.0, {("t", 0): 1000, ("t", 1): 500})
    assert book.rates() == {("t", 0): 200.0, ("t", 1): 0.0}
    book.add(12.0, {("t", 0): 1400, ("t", 1): 1200})
    # The sample at 0 s left the window: t/0 over 5..12 s, t/1 likewise.
    assert book.rates() == {("t", 0): pytest.approx(400 / 7), ("t", 1): pytest.approx(700 / 7)}


def test_log_size_book_starts_over_when_retention_shrinks_a_log():
    book = LogSizeBook(window_s=30)
    book.add(0.0, {("t", 0): 10_000})
    book.add(5.0, {("t", 0): 11_000})
    book.add(10.0, {("t", 0): 2_000})  # a segment was deleted: not a negative rate
    assert book.rates() == {}
    book.add(15.0, {("t", 0): 2_500})
    assert book.rates() == {("t", 0): 100.0}
