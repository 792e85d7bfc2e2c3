"""The `groupfit` command: assign, evaluate, generate-stream, algorithms."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from app.cli import main
from app.sim.stream import generate_stream

REQUEST = {
    "algorithm": "bfd",
    "capacity": 10,
    "partitions": [{"topic": "t", "partition": p, "rate": 4} for p in range(5)],
    "previous": {"a": [{"topic": "t", "partition": 0}]},
}


def test_assign_from_a_file(tmp_path, capsys):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(REQUEST))
    assert main(["assign", "--input", str(path)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["consumer_count"] == 3 and answer["lower_bound"] == 2
    assert "matrix" not in answer["delta"]


def test_assign_from_stdin_with_dense_delta():
    ran = subprocess.run(
        [sys.executable, "-m", "app.cli", "assign", "-i", "-", "--dense"],
        input=json.dumps(REQUEST),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    delta = json.loads(ran.stdout)["delta"]
    assert len(delta["matrix"]) == len(delta["rows"]) and len(delta["matrix"][0]) == len(delta["columns"]) == 5


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("{", "invalid_json"),
        ("[]", "invalid_request"),
        (json.dumps({**REQUEST, "algorithm": "x"}), "unknown_algorithm"),
    ],
)
def test_errors_exit_2_with_the_error_on_stderr(text, code):
    ran = subprocess.run(
        [sys.executable, "-m", "app.cli", "assign", "-i", "-"], input=text, capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2 and ran.stdout == ""
    assert json.loads(ran.stderr)["error"]["code"] == code


def test_evaluate_json_on_the_reference_stream(reference_stream_path, capsys):
    assert (
        main(
            [
                "evaluate",
                "--stream",
                str(reference_stream_path),
                "--capacity",
                "100",
                "--algorithms",
                "mwf,bfd",
                "--json",
            ]
        )
        == 0
    )
    results = json.loads(capsys.readouterr().out)["results"]
    assert set(results) == {"mwf", "bfd"}
    for r in results.values():
        assert set(r) == {"avg_consumers", "avg_rscore", "cbs", "iterations", "consumers", "rscore"}
        assert r["iterations"] == len(r["consumers"]) == len(r["rscore"]) == 100
    assert results["bfd"]["cbs"] <= results["mwf"]["cbs"]


def test_evaluate_table(reference_stream_path, capsys):
    assert main(["evaluate", "--stream", str(reference_stream_path), "--capacity", "100", "--algorithms", "nf"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "algorithm" and lines[1].split()[0] == "nf"


def test_generate_stream_is_deterministic_and_clipped(tmp_path):
    out = tmp_path / "s.json"
    assert (
        main(
            [
                "generate-stream",
                "--partitions",
                "20",
                "--measurements",
                "50",
                "--delta",
                "25",
                "--seed",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    stream = json.loads(out.read_text())
    assert stream == generate_stream(20, 50, 25, 4)
    assert stream != generate_stream(20, 50, 25, 5)
    rates = [r for m in stream for partitions in m.values() for r in partitions.values()]
    assert len(stream) == 50 and all(0 <= r <= 100 and r == int(r) for r in rates)
    steps = [abs(b["topic-0"][p] - a["topic-0"][p]) for a, b in itertools.pairwise(stream) for p in a["topic-0"]]
    assert max(steps) <= 25


def test_algorithms_lists_the_registry_as_a_table_or_json(capsys):
    assert main(["algorithms", "--json"]) == 0
    names = {a["name"] for a in json.loads(capsys.readouterr().out)}
    assert {"mwf", "bfd", "nf"} <= names
    assert main(["algorithms"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert {line.split()[0] for line in table if not line.startswith(" ")} == names
    assert len(table) == 2 * len(names)


def test_evaluate_table_has_every_percentile_and_reports_progress(reference_stream_path, capsys):
    argv = ["evaluate", "--stream", str(reference_stream_path), "--capacity", "100", "--algorithms", "mwf,bfd"]
    assert main([*argv, "--latency"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].split()[-10:] == ["p50", "s", "p90", "s", "p95", "s", "p99", "s", "max", "s"]
    assert [line.split(":")[1].split()[0] for line in captured.err.splitlines()] == ["mwf", "bfd"]


@pytest.mark.parametrize(
    "argv",
    [
        ["assign", "--input", "/no/such/request.json"],
        ["evaluate", "--stream", "/no/such/stream.json", "--capacity", "100"],
        ["report", "--stream", "data/reference/paper_stream_delta5.json", "--out", "/proc/no-such-folder"],
    ],
)
def test_a_missing_file_is_one_line_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_generate_stream_says_what_it_wrote(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["generate-stream", "--partitions", "3", "--measurements", "2", "--delta", "5", "-o", str(out)]) == 0
    assert str(out) in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["algorithms"], ["generate-stream", "--partitions", "200", "--measurements", "2000", "--delta", "5"]]
)
def test_piping_into_head_prints_no_broken_pipe(argv):
    reader = subprocess.Popen(["head", "-c", "10"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    ran = subprocess.run(
        [sys.executable, "-m", "app.cli", *argv], stdout=reader.stdin, stderr=subprocess.PIPE, timeout=120
    )
    reader.stdin.close()
    reader.wait(timeout=10)
    assert ran.returncode == 0 and b"BrokenPipe" not in ran.stderr and b"Traceback" not in ran.stderr


def test_members_of_their_own_capacity(tmp_path, capsys):
    # No two of 70, 70, 50 fit a member of C = 100; "big" (capacity 200) takes all three (190).
    request = {
        "algorithm": "bfd",
        "capacity": 100,
        "members": [{"id": "big", "capacity": 200}, "a"],
        "partitions": [{"topic": "t", "partition": p, "rate": r} for p, r in enumerate([70, 70, 50])],
    }
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    assert main(["assign", "--input", str(path)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["overloaded_members"] == [] and len(answer["assignment"]["big"]) == 3
    assert {c["id"]: c["utilization"] for c in answer["consumers"]} == {"a": 0.0, "big": pytest.approx(0.95)}


@pytest.mark.parametrize(
    ("members", "code"),
    [
        ([{"id": "a", "capacity": 0}], "invalid_capacity"),
        ([{"id": "a", "cores": 2}], "invalid_members"),
        ([{"id": "a", "capacity": 50}, "a"], "invalid_members"),
    ],
)
def test_bad_member_capacities_exit_2(tmp_path, capsys, members, code):
    path = tmp_path / "request.json"
    path.write_text(json.dumps({**REQUEST, "members": members}))
    assert main(["assign", "--input", str(path)]) == 2
    assert json.loads(capsys.readouterr().err)["error"]["code"] == code
