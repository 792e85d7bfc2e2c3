"""The Java assignors alone, in one JVM and on the same input (JMH 1.37, `-prof gc`): the broker-side
GroupfitBrokerAssignor's full assign() with the rates known (the Java core) beside Kafka's UniformAssignor and
RangeAssignor, and the classic GroupfitAssignor's local path (the Java core on its inputs) beside Kafka's
CooperativeStickyAssignor; 1 000 partitions / 20 members, 50 000 / 1 000 and 500 000 / 10 000 (10 topics, skewed
rates, the last member just joined; `zone-aware`: the same group with members and partitions in three racks, the
core in its zone mode). Prints time per assignment (mean, p50, p99), allocation per assignment
(gc.alloc.rate.norm) and the ratio to Kafka's assignor of the same protocol. Builds clients/java with
`mvn -Pbench` first (the benchmark is src/bench/java/io/groupfit/kafka/AssignorsBench.java).

    .venv/bin/python bench/java_assignors.py [--sizes 1000/20,50000/1000] [--quick] [--json out.json]
        [--only brokerGroupfit,brokerGroupfitZones]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from app.local.java_clients import PROJECT, maven
from app.local.kafka import KafkaSetupError, java

SIZES = ["1000/20", "50000/1000", "500000/10000"]
BROKER = {
    "brokerGroupfit": "GroupfitBrokerAssignor",
    "brokerGroupfitCold": "GroupfitBrokerAssignor, cold",
    "brokerGroupfitZones": "GroupfitBrokerAssignor, zone-aware",
    "brokerUniform": "UniformAssignor",
    "brokerRange": "RangeAssignor",
}
CLASSIC = {
    "classicGroupfitCore": "GroupfitAssignor (local core)",
    "classicCooperativeSticky": "CooperativeStickyAssignor",
}


def classpath() -> str:
    done = maven(
        "-Pbench",
        "test-compile",
        "dependency:build-classpath",
        "-Dmdep.outputFile=target/bench-classpath.txt",
        "-Dmdep.includeScope=test",
    )
    if done.returncode != 0:
        raise KafkaSetupError(f"`mvn -Pbench test-compile` failed:\n{(done.stdout + done.stderr)[-6000:]}")
    target = PROJECT / "target"
    dependencies = (target / "bench-classpath.txt").read_text().strip()
    return os.pathsep.join([str(target / "test-classes"), str(target / "classes"), dependencies])


def run(sizes: list[str], quick: bool, out: Path, only: list[str] | None = None) -> list[dict]:
    benchmarks = "io.groupfit.kafka.AssignorsBench" + (f"\\.({'|'.join(only)})$" if only else "")
    command = [java(), "-cp", classpath(), "org.openjdk.jmh.Main", benchmarks]
    command += ["-p", "size=" + ",".join(sizes), "-prof", "gc", "-rf", "json", "-rff", str(out)]
    # (replaces the benchmark's own jvmArgsAppend: the heap is set here too)
    command += ["-jvmArgsAppend", "-Xms2g -Xmx6g -Dorg.slf4j.simpleLogger.defaultLogLevel=error"]
    if quick:
        command += ["-wi", "2", "-w", "1", "-i", "3", "-r", "1"]
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def secondary(result: dict, name: str) -> float | None:
    for key, metric in result.get("secondaryMetrics", {}).items():
        if key.lstrip("·") == name:
            return metric["score"]
    return None


def table(results: list[dict]) -> str:
    """One row per change (the group forms, a member joins, one leaves), size and assignor; × Kafka: against
    Kafka's assignor of the same protocol on the same change and size."""
    by = {(r["benchmark"].rsplit(".", 1)[-1], r["params"]["change"], r["params"]["size"]): r for r in results}
    seen = {size for _, _, size in by}
    sizes = [s for s in SIZES if s in seen] + sorted(seen - set(SIZES))
    changes = sorted({change for _, change, _ in by})
    lines = [
        f"{'change':<6} {'partitions/members':>18}  {'assignor':<32} {'mean ms':>9} {'p50 ms':>9} {'p99 ms':>9} "
        f"{'alloc MB/op':>11} {'× Kafka':>8}"
    ]
    for change in changes:
        for size in sizes:
            lines += _rows(by, change, size)
    return "\n".join(lines)


def _rows(by: dict, change: str, size: str) -> list[str]:
    lines = []
    for group, baseline in ((BROKER, "brokerUniform"), (CLASSIC, "classicCooperativeSticky")):
        base = by.get((baseline, change, size))
        for method, label in group.items():
            result = by.get((method, change, size))
            if result is None:
                continue
            metric = result["primaryMetric"]
            percentiles = metric.get("scorePercentiles", {})
            alloc = secondary(result, "gc.alloc.rate.norm")
            ratio = metric["score"] / base["primaryMetric"]["score"] if base and method != baseline else None
            lines.append(
                f"{change:<6} {size:>18}  {label:<32} {metric['score']:>9.3f} {percentiles.get('50.0', float('nan')):>9.3f} "
                f"{percentiles.get('99.0', float('nan')):>9.3f} "
                f"{(alloc or float('nan')) / 1e6:>11.2f} {'' if ratio is None else f'{ratio:.2f}':>8}"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(SIZES), help="partitions/members, comma-separated")
    parser.add_argument("--quick", action="store_true", help="fewer and shorter iterations (a smoke run)")
    parser.add_argument("--json", type=Path, help="keep JMH's JSON results here")
    parser.add_argument("--only", help="these benchmarks alone, comma-separated (e.g. brokerGroupfit,brokerUniform)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.json or Path(scratch) / "jmh.json"
        results = run(args.sizes.split(","), args.quick, out, args.only.split(",") if args.only else None)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end of the run")
    print(table(results))


if __name__ == "__main__":
    main()
