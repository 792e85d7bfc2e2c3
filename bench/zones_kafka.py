"""groupfit's zone-aware answer beside Kafka's rack-aware CooperativeStickyAssignor (KIP-881) on the same input:
cross-zone rate and consumers over capacity over a drifting stream (issue #29).

The input is bench/zones.py's: three zones, six brokers (two per zone) holding each partition's replicas as
Kafka's rack-aware placement puts them, consumers reading from the leader (or, with `--fetch-from-follower`,
from either of two replicas), a fixed group of members spread over the zones with 1.25 × the stream's peak rate
of capacity, evenly (`members-even`) or with the third zone at half the capacity of each other one
(`members-uneven`: that zone lacks capacity for its leaders' rate; `bound` is the least cross-zone share that
leaves). Kafka's assignor runs in a JVM (clients/java's src/bench RackAwareSticky.java, kafka-clients as the pom
pins it) on the members' racks (Subscription's rack id) and the partitions' replicas (given the leader alone when
consumers fetch from the leader, since KIP-881 counts a partition as in a rack when any replica is); it balances
partition counts and knows no rates, so its one assignment serves every measurement. groupfit's MWF and BFD run
on the Python reference with the members' and partitions' racks (zone-aware) and without (rack-unaware MWF).

Columns: consumers holding partitions (mean), Rscore (mean after the first measurement), the cross-zone share of
the total rate (mean after the first; `max`), `bound`, `over`: the most consumers above their capacity in one
measurement (holding two or more partitions), `excess`: the rate above capacity summed over consumers, as a share
of the total (mean), and the time of one assignment.

    .venv/bin/python bench/zones_kafka.py [--partitions 1000,10000] [--measurements 10] [--fetch-from-follower]
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import tempfile
from pathlib import Path

from java_assignors import classpath
from zones import BROKERS, Run, arguments, kafka_replicas, members_of, replay

from app.local.kafka import java
from app.sim.stream import flatten, generate_stream

SCENARIOS = ("members-uneven-fine", "members-even-fine", "members-uneven-paper")
GROUPFIT = (("mwf", False), ("mwf", True), ("bfd", True))


def kafka_sticky(jvm_classpath: str, replicas: list[list[int]], members: dict[str, str]) -> tuple[dict, float]:
    """Kafka's CooperativeStickyAssignor's assignment (member → partitions of topic-0) and its time in ms."""
    with tempfile.TemporaryDirectory() as scratch:
        spec = Path(scratch) / "group.json"
        brokers = {str(b): rack for b, rack in BROKERS}
        spec.write_text(json.dumps({"topic": "topic-0", "brokers": brokers, "replicas": replicas, "members": members}))
        done = subprocess.run(
            [java(), "-cp", jvm_classpath, "io.groupfit.kafka.RackAwareSticky", str(spec)],
            check=True,
            capture_output=True,
            text=True,
        )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["assignment"], answer["micros"] / 1000


def static_run(stream: list, assignment: dict, racks_of: dict, members: dict[str, str], capacity: float) -> Run:
    """The measurements of a rate-unaware assignment that does not change while the members stay."""
    run = Run()
    owner = {("topic-0", p): member for member, held in assignment.items() for p in held}
    for measurement in stream:
        keys, rates = flatten(measurement)
        load: dict[str, float] = {}
        count: dict[str, int] = {}
        cross = 0.0
        for key, rate in zip(keys, rates, strict=True):
            member = owner[key]
            load[member] = load.get(member, 0.0) + rate
            count[member] = count.get(member, 0) + 1
            if members[member] not in racks_of[key]:
                cross += rate
        total = math.fsum(rates)
        run.consumers.append(sum(1 for c in count.values() if c))
        run.rscore.append(0.0)  # the same members, the same partitions: nothing moves
        run.cross.append(cross / total)
        run.overloaded.append(sum(1 for m, rate in load.items() if count[m] > 1 and rate > capacity * 1.000001))
        run.excess.append(math.fsum(max(0.0, rate - capacity) for rate in load.values()) / total)
    return run


def main() -> None:
    args = arguments(__doc__, SCENARIOS)
    jvm_classpath = classpath()
    follower = args.fetch_from_follower
    print(
        f"{'partitions':>10} {'scenario':<22} {'assignor':<26} {'consumers':>9} {'Rscore':>7} {'cross-zone':>10} "
        f"{'max':>6} {'bound':>6} {'over':>5} {'excess':>7} {'ms':>8}"
    )
    for n in (int(size) for size in args.partitions.split(",")):
        replicas = kafka_replicas(n, 2 if follower else 3, random.Random(args.seed))
        rack_of = dict(BROKERS)
        readable = [placed if follower else placed[:1] for placed in replicas]
        racks_of = {("topic-0", p): sorted({rack_of[b] for b in brokers}) for p, brokers in enumerate(readable)}
        for scenario in args.scenarios.split(","):
            capacity = 100.0 if scenario.endswith("paper") else 1000.0
            stream = generate_stream(n, args.measurements, args.delta, args.seed, capacity=100.0)
            peak = max(math.fsum(flatten(m)[1]) for m in stream)
            members = members_of(scenario, capacity, peak)
            assert members is not None, "the comparison is of a fixed group: a members-* scenario"
            runs: list[tuple[str, Run, float]] = []
            for algorithm, zoned in GROUPFIT:
                run = replay(stream, racks_of, algorithm, zoned, capacity, members)
                runs.append((f"groupfit {algorithm}{' zones' if zoned else ''}", run, statistics.fmean(run.seconds)))
            assignment, ms = kafka_sticky(jvm_classpath, readable, members)
            kafka = static_run(stream, assignment, racks_of, members, capacity)
            kafka.bound = runs[0][1].bound
            runs.append(("Kafka CooperativeSticky rack", kafka, ms / 1000))
            for name, run, seconds in runs:
                cross = run.cross[1:] or run.cross
                bound = run.bound[1:] or run.bound
                excess = f"{100 * statistics.fmean(run.excess):.2f}%"
                print(
                    f"{n:>10} {scenario:<22} {name:<26} {statistics.fmean(run.consumers):>9.1f} "
                    f"{statistics.fmean(run.rscore[1:] or run.rscore):>7.2f} {100 * statistics.fmean(cross):>9.2f}% "
                    f"{100 * max(cross):>5.1f}% {f'{100 * statistics.fmean(bound):.1f}%' if bound else '-':>6} "
                    f"{max(run.overloaded):>5} {excess:>7} {1000 * seconds:>8.1f}",
                    flush=True,
                )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end of the run")


if __name__ == "__main__":
    main()
