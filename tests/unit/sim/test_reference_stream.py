"""The paper's qualitative findings on its published stream (C = 100, δ = 5, 32 partitions)."""

from __future__ import annotations

import pytest

from app.sim.evaluate import evaluate
from app.sim.stream import load_stream

PAPER_TWELVE = ["nf", "ff", "bf", "wf", "nfd", "ffd", "bfd", "wfd", "mwf", "mbf", "mwfp", "mbfp"]


@pytest.fixture(scope="module")
def results(reference_stream_path):
    return evaluate(load_stream(reference_stream_path), 100, PAPER_TWELVE)["results"]


def test_mwf_has_the_lowest_average_rscore(results):
    by_rscore = sorted(PAPER_TWELVE, key=lambda a: results[a]["avg_rscore"])
    assert by_rscore[0] == "mwf"


def test_fewest_consumers_by_a_decreasing_fit(results):
    fewest = min(PAPER_TWELVE, key=lambda a: results[a]["avg_consumers"])
    assert fewest in {"bfd", "ffd", "wfd"}
    assert results[fewest]["cbs"] == min(r["cbs"] for r in results.values())


def test_next_fit_variants_use_the_most_consumers(results):
    by_consumers = sorted(PAPER_TWELVE, key=lambda a: results[a]["avg_consumers"], reverse=True)
    assert set(by_consumers[:2]) == {"nf", "nfd"}


def test_mwf_uses_about_15_consumers_as_published(results):
    assert results["mwf"]["avg_consumers"] == pytest.approx(15, abs=0.5)


def test_first_iteration_counts_as_zero_rscore(results):
    assert all(r["rscore"][0] == 0 and r["iterations"] == 100 for r in results.values())
