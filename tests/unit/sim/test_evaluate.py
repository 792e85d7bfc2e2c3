"""`groupfit evaluate` and evaluate_document (the entry POST /v1/evaluate uses): figures, checks, the
exact optimum; the generated streams."""

from __future__ import annotations

import json

import msgspec
import pytest

from app.cli import main
from app.codec.evaluate import EvaluateRequest
from app.codec.wire import decode
from app.core.errors import AssignmentError
from app.sim.evaluate import check_names, evaluate, evaluate_request
from app.sim.stream import generate_stream, load_stream

SMALL = [{"t": {"0": 60.0, "1": 50.0, "2": 30.0, "3": 20.0}}, {"t": {"0": 70.0, "1": 20.0, "2": 40.0, "3": 30.0}}]


def test_evaluate_with_latency_and_kd(reference_stream_path, capsys):
    assert (
        main(
            [
                "evaluate",
                "--stream",
                str(reference_stream_path),
                "--capacity",
                "100",
                "--algorithms",
                "mwf,kd_15",
                "--latency",
                "--json",
            ]
        )
        == 0
    )
    results = json.loads(capsys.readouterr().out)["results"]
    assert set(results["kd_15"]["latency"]) == {"p50", "p90", "p95", "p99", "max"}
    assert results["kd_15"]["avg_consumers"] == 15 and results["kd_15"]["avg_rscore"] == 0
    latency = results["mwf"]["latency"]
    assert 0 <= latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"] <= latency["max"] == 5.0


def test_cbs_is_measured_against_assignments_within_capacity():
    # kd_1 packs 180 into one consumer of C = 100: fewer consumers, but not a packing; CBS must not count it.
    alone = evaluate(SMALL, 100, ["bfd", "nfd"])["results"]
    beside_kd = evaluate(SMALL, 100, ["bfd", "nfd", "kd_1"])["results"]
    assert beside_kd["bfd"]["cbs"] == alone["bfd"]["cbs"] == 0
    assert beside_kd["nfd"]["cbs"] == alone["nfd"]["cbs"]
    assert beside_kd["kd_1"]["cbs"] < 0


def test_an_unbounded_latency_is_null_in_json_and_infinite_in_the_table(tmp_path, capsys):
    # C = 200 above C̄ = 133: a consumer keeps ≥ C̄ and starts partitions, which the model never reads.
    stream = generate_stream(12, 6, 25, seed=3)
    doc = {"stream": stream, "capacity": 200, "algorithms": ["bfd"], "latency": {}}
    latency = evaluate_document(doc)["results"]["bfd"]["latency"]
    assert latency["max"] is None and latency["p99"] is None  # over 1 % of the bytes are never read
    assert 0 < latency["p50"] < latency["p90"] < float("inf")  # the others are
    path = tmp_path / "s.json"
    path.write_text(json.dumps(stream))
    assert main(["evaluate", "--stream", str(path), "--capacity", "200", "--algorithms", "bfd", "--latency"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "∞"


@pytest.mark.parametrize(
    "doc, code",
    [
        ([], "invalid_request"),
        ({"stream": SMALL, "capacity": 100, "extra": 1}, "invalid_request"),
        ({"stream": [], "capacity": 100}, "invalid_request"),
        ({"stream": [{"t": 5}], "capacity": 100}, "invalid_request"),
        ({"stream": [{"t": {"0": "x"}}], "capacity": 100}, "invalid_rate"),
        ({"stream": [{"t": {"0": True}}], "capacity": 100}, "invalid_rate"),
        ({"stream": [{"t": {"0": -1}}], "capacity": 100}, "invalid_rate"),
        ({"stream": [{"t": {"a": 1}}], "capacity": 100}, "invalid_request"),
        ({"stream": SMALL, "capacity": 0}, "invalid_capacity"),
        ({"stream": SMALL, "capacity": "100"}, "invalid_capacity"),
        ({"stream": SMALL, "capacity": 100, "algorithms": []}, "invalid_request"),
        ({"stream": SMALL, "capacity": 100, "algorithms": ["mwf", "nope"]}, "unknown_algorithm"),
        ({"stream": SMALL, "capacity": 100, "latency": {"consumer_throughput": 0}}, "invalid_parameter"),
        ({"stream": SMALL, "capacity": 100, "latency": {"speed": 1}}, "invalid_parameter"),
        ({"stream": SMALL, "capacity": 100, "latency": {"iteration_s": "30"}}, "invalid_parameter"),
        ({"stream": SMALL, "capacity": 100, "optimum": {"time_limit_ms": 1}}, "invalid_parameter"),
    ],
)
def test_bad_documents_fail_with_a_stable_code(doc, code):
    with pytest.raises(AssignmentError) as error:
        evaluate_document(doc)
    assert error.value.code == code


def test_the_document_and_the_command_give_the_same_figures(reference_stream_path, capsys):
    stream = load_stream(reference_stream_path)[:20]
    doc = {
        "stream": stream,
        "capacity": 100,
        "algorithms": ["mwf", "bfd", "kd_15"],
        "latency": {"consumer_throughput": 133, "iteration_s": 30, "rebalance_s": 5},
    }
    by_document = evaluate_document(doc)
    path = reference_stream_path.parent / "paper_stream_delta5.json"
    assert (
        main(
            [
                "evaluate",
                "--stream",
                str(path),
                "--capacity",
                "100",
                "--algorithms",
                "mwf,bfd,kd_15",
                "--latency",
                "--json",
            ]
        )
        == 0
    )
    full = json.loads(capsys.readouterr().out)
    assert set(by_document["results"]) == set(full["results"]) == {"mwf", "bfd", "kd_15"}
    assert by_document["results"]["mwf"]["consumers"] == full["results"]["mwf"]["consumers"][:20]


def test_consumers_against_the_exact_optimum(capsys, tmp_path):
    # 160 of rate in each measurement needs ≥ 2 consumers of C = 100; {60, 30} {50, 20} and {70, 30} {40, 20} fit.
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL))
    assert (
        main(
            [
                "evaluate",
                "--stream",
                str(path),
                "--capacity",
                "100",
                "--algorithms",
                "nf,bfd",
                "--optimum",
                "--optimum-time-limit-ms",
                "200",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    best = report["optimum"]
    assert best["consumers"] == best["consumers_bound"] == [2, 2] and best["proven"] == 2
    assert report["results"]["bfd"]["optimum_excess"] == 0
    nf = report["results"]["nf"]
    assert nf["optimum_excess"] == pytest.approx(sum((z - 2) / 2 for z in nf["consumers"]) / 2)


def test_generated_measurements_after_the_first_list_partitions_in_a_random_order():
    shuffled, ordered = generate_stream(30, 4, 5, seed=2), generate_stream(30, 4, 5, seed=2, ordered=True)
    assert shuffled == ordered  # the same rates (dict equality ignores order)
    assert list(shuffled[0]["topic-0"]) == list(ordered[0]["topic-0"]) == [str(p) for p in range(30)]
    assert all(list(m["topic-0"]) != list(o["topic-0"]) for m, o in zip(shuffled[1:], ordered[1:]))
    assert all(list(o["topic-0"]) == [str(p) for p in range(30)] for o in ordered)


def evaluate_document(doc):
    """A request document through the codec, as POST /v1/evaluate and `groupfit evaluate` decode it."""
    body = json.dumps(doc, allow_nan=True).encode()
    return msgspec.to_builtins(evaluate_request(decode(msgspec.json.Decoder(EvaluateRequest), body)))


def test_repack_at_a_weight_is_a_name_to_evaluate(reference_stream_path):
    stream = load_stream(reference_stream_path)[:10]
    results = evaluate(stream, 100, ["repack", "repack@1", "repack@0.2"])["results"]
    assert results["repack@1"]["consumers"] == results["repack"]["consumers"]  # 1 is the default weight
    assert results["repack@0.2"]["avg_rscore"] <= results["repack"]["avg_rscore"]
    with pytest.raises(AssignmentError) as error:
        check_names(["repack@0"])
    assert error.value.code == "unknown_algorithm" and "repack@<W>" in error.value.message
