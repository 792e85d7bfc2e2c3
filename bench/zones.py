"""Zone-aware assignment (issue #29) against rack-unaware MWF: cross-zone rate, consumers, Rscore and time per
assignment over a drifting stream (app/sim/stream.py, Landau et al. Eq. 15), on the Python reference core or the
compiled one (`--core`).

Three zones; six brokers, two per zone, hold each partition's three replicas as Kafka's rack-aware placement
puts them (AdminUtils.assignReplicasToBrokersRackAware: brokers alternating by rack, the leader rotating over
them); a consumer reads a partition within its zone from its leader's rack (fetch from the leader) or, with
`--fetch-from-follower`, from any replica's rack (here replication 2, so two of the three zones). Scenarios:

- autoscale: groupfit sizes the group and names each new consumer's rack; a consumer keeps its rack for
  as long as it runs (rack-unaware MWF's new consumers are started in the rack where most of their rate is
  local, which is what an autoscaler told nothing better would do);
- members: a fixed group spread over the zones, capacity 1.25 × the stream's largest total rate, either even
  (each zone a third) or uneven (the third zone half the capacity of each other one, so it lacks capacity for
  its leaders' rate: `bound`, fetching from the leader, is the least cross-zone rate that leaves, the rate of
  each zone's leaders beyond its members' capacity).

Granularity: `paper` rates are U[0, 1]·C per partition as in the paper (two partitions per consumer), `fine`
ones U[0, 0.1]·C (about twenty). Rack-unaware MWF is the baseline of the × columns; the cross-zone rate (of the
total rate) and the Rscore are averaged over the measurements after the first (the first has no previous
assignment); `max` is the largest cross-zone share, `over` the most consumers holding two or more partitions
above their capacity in one measurement; `ms` the median time of one assignment.

`--core compiled` runs the algorithms the compiled core runs (not repack) there and times `Bulk.solve` alone (the
conversion of the Python objects to and from its arrays left out); `zones×` is each zone-aware algorithm's time
over the same algorithm's rack-unaware time, in the same run (issue #29's target: at most 2 at 100 000
partitions). `--core both` runs each algorithm on both cores, requires the same assignment of each measurement
from both, and prints both times (`ref ms`).

    .venv/bin/python bench/zones.py [--partitions 1000,10000] [--measurements 10] [--delta 10] [--seed 1]
                                    [--scenarios autoscale-paper,...] [--fetch-from-follower]
                                    [--core reference|compiled|both]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time
from dataclasses import dataclass, field

from app.core import native
from app.core.algorithm import get_algorithm
from app.core.assign import compiled_outcome, solve, zone_report
from app.core.model import build_problem
from app.sim.stream import flatten, generate_stream

RACKS = ("eu-1a", "eu-1b", "eu-1c")
BROKERS = [(b, RACKS[b % 3]) for b in range(6)]
ALGORITHMS = (("mwf", False), ("mwf", True), ("bfd", False), ("bfd", True), ("repack", False), ("repack", True))
SCENARIOS = ("autoscale-paper", "autoscale-fine", "members-even-fine", "members-uneven-fine", "members-uneven-paper")


def rack_alternated(brokers: list[tuple[int, str]]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack in turn, racks and brokers in order."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(brokers):
        by_rack.setdefault(rack, []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    return [queue[i] for i in range(max(map(len, queues))) for queue in queues if i < len(queue)]


def kafka_replicas(partitions: int, replication: int, rng: random.Random) -> list[list[int]]:
    """Kafka's assignReplicasToBrokersRackAware: the leader rotates over the rack-alternated brokers from a random
    start; each follower is the next broker (by a shift that grows every round) of a rack without a replica."""
    rack_of = dict(BROKERS)
    arranged = rack_alternated(BROKERS)
    n, racks = len(arranged), len(set(rack_of.values()))
    start, shift = rng.randrange(n), rng.randrange(n)
    placed = []
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [arranged[first]]
        k = 0
        while len(replicas) < replication:
            broker = arranged[(first + 1 + (shift * racks + k) % (n - 1)) % n]
            used_racks = {rack_of[r] for r in replicas}
            if (rack_of[broker] not in used_racks or len(used_racks) == racks) and broker not in replicas:
                replicas.append(broker)
            k += 1
        placed.append(replicas)
    return placed


@dataclass
class Run:
    consumers: list[int] = field(default_factory=list)
    rscore: list[float] = field(default_factory=list)
    cross: list[float] = field(default_factory=list)  # cross-zone rate over the total rate
    bound: list[float] = field(default_factory=list)  # the least cross-zone share (members: a zone's shortfall)
    overloaded: list[int] = field(default_factory=list)  # consumers holding 2+ partitions above their capacity
    excess: list[float] = field(default_factory=list)  # the rate above capacity, all consumers, over the total rate
    seconds: list[float] = field(default_factory=list)
    assignments: list[dict[str, list[int]]] = field(default_factory=list)


def members_of(scenario: str, capacity: float, peak: float) -> dict[str, str] | None:
    """The group's members and their racks: 1.25 × the peak rate of capacity, spread as the scenario says."""
    if not scenario.startswith("members"):
        return None
    count = math.ceil(1.25 * peak / capacity)
    weights = (1, 1, 1) if "even" in scenario.split("-") else (2, 2, 1)
    members, assigned = {}, 0
    for r, rack in enumerate(RACKS):
        share = round(count * weights[r] / sum(weights)) if r < len(RACKS) - 1 else count - assigned
        for _ in range(share):
            members[f"m{assigned}"] = rack
            assigned += 1
    return members


def timed_solve(problem, spec, params, core: str):
    """(the outcome, the seconds the algorithm took): the reference's `solve`, or the compiled core's
    `Bulk.solve` alone (the conversion of the Python objects to and from its arrays left out of the time)."""
    if core == "reference":
        started = time.perf_counter()
        outcome = solve(problem, spec, params)
        return outcome, time.perf_counter() - started
    bulk = native.bulk_of(problem, spec.name, params)
    assert bulk is not None, "the compiled core does not run this"
    complete = native.complete(spec.name, params)
    started = time.perf_counter()
    solution = bulk.solve(spec.name, problem.capacity, complete)
    seconds = time.perf_counter() - started
    return compiled_outcome(problem, spec.name, solution.parts()), seconds


def replay(
    stream: list,
    racks_of: dict[tuple[str, int], list[str]],
    algorithm: str,
    zoned: bool,
    capacity: float,
    members,
    core: str = "reference",
) -> Run:
    run = Run()
    spec = get_algorithm(algorithm)
    params = spec.parse_params({})
    previous: dict[str, list[tuple[str, int]]] = {}
    previous_racks: dict[str, str] = {}
    for measurement in stream:
        keys, rates = flatten(measurement)
        racks = [racks_of[key] for key in keys]
        known = members if members is not None else previous_racks
        ids = None if members is None else list(members)

        zoned_problem = build_problem(
            keys, rates, None, capacity, previous, ids, None, racks=racks, consumer_racks=known
        )
        solved = zoned_problem if zoned else build_problem(keys, rates, None, capacity, previous, ids)
        outcome, seconds = timed_solve(solved, spec, params, core)
        run.seconds.append(seconds)
        run.assignments.append(outcome.assignment)
        report = outcome.zones if zoned else zone_report(zoned_problem, outcome.assignment, {})
        assert report is not None
        total = math.fsum(rates)
        run.consumers.append(outcome.consumer_count)
        run.rscore.append(outcome.rscore)
        run.cross.append(report.cross_zone_rate / total if total else 0.0)
        run.overloaded.append(
            sum(1 for c, held in outcome.assignment.items() if len(held) > 1 and outcome.loads[c] > capacity * 1.000001)
        )
        run.excess.append(math.fsum(max(0.0, load - capacity) for load in outcome.loads.values()) / total)
        if members is not None and all(len(listed) == 1 for listed in racks):  # (a flow bound otherwise)
            load: dict[str, float] = {}
            for key, rate in zip(keys, rates):
                load[racks_of[key][0]] = load.get(racks_of[key][0], 0.0) + rate
            room = {rack: capacity * sum(1 for r in members.values() if r == rack) for rack in RACKS}
            run.bound.append(sum(max(0.0, load.get(rack, 0.0) - room[rack]) for rack in RACKS) / total)
        previous = {c: [keys[j] for j in held] for c, held in outcome.assignment.items() if held}
        previous_racks = {c: rack for c, rack in report.racks.items() if rack is not None and c in previous}
    return run


def arguments(description: str | None, scenarios: tuple[str, ...], cores: bool = False) -> argparse.Namespace:
    """The stream's and the cluster's arguments (this script's and bench/zones_kafka.py's; `cores`: --core)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1000", help="comma-separated sizes")
    parser.add_argument("--measurements", type=int, default=10)
    parser.add_argument("--delta", type=int, default=10, help="δ of the stream (percent of C per step)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scenarios", default=",".join(scenarios))
    parser.add_argument("--fetch-from-follower", action="store_true", help="replication 2; racks of both replicas")
    if cores:
        parser.add_argument("--core", choices=("reference", "compiled", "both"), default="reference")
    args = parser.parse_args()
    if cores and args.core != "reference" and not native.AVAILABLE:
        parser.error("the compiled core is not installed (make .venv/.native)")
    return args


def main() -> None:
    args = arguments(__doc__, SCENARIOS, cores=True)
    cores = {"reference": ["reference"], "compiled": ["compiled"], "both": ["compiled", "reference"]}[args.core]
    algorithms = [(a, z) for a, z in ALGORITHMS if args.core == "reference" or a in native.ALGORITHMS]
    print(
        f"{'partitions':>10} {'scenario':<22} {'algorithm':<12} {'consumers':>9} {'×':>6} {'Rscore':>7} {'×':>6} "
        f"{'cross-zone':>10} {'max':>6} {'bound':>6} {'over':>5} {'ms':>8} {'zones×':>6}"
        + (f" {'ref ms':>9}" if args.core == "both" else "")
    )
    for n in (int(size) for size in args.partitions.split(",")):
        rng = random.Random(args.seed)
        replicas = kafka_replicas(n, 2 if args.fetch_from_follower else 3, rng)
        rack_of = dict(BROKERS)
        racks_of = {
            ("topic-0", p): sorted({rack_of[b] for b in (placed if args.fetch_from_follower else placed[:1])})
            for p, placed in enumerate(replicas)
        }
        for scenario in args.scenarios.split(","):
            capacity = 100.0 if scenario.endswith("paper") else 1000.0
            stream = generate_stream(n, args.measurements, args.delta, args.seed, capacity=100.0)
            peak = max(math.fsum(flatten(m)[1]) for m in stream)
            members = members_of(scenario, capacity, peak)
            baseline: Run | None = None
            unaware: dict[str, float] = {}
            for algorithm, zoned in algorithms:
                runs = [replay(stream, racks_of, algorithm, zoned, capacity, members, core) for core in cores]
                run = runs[0]
                if len(runs) > 1:
                    assert run.assignments == runs[1].assignments, f"{scenario} {algorithm}: the cores differ"
                baseline = baseline or run
                consumers, rscore = statistics.fmean(run.consumers), statistics.fmean(run.rscore[1:])
                base_consumers, base_rscore = (
                    statistics.fmean(baseline.consumers),
                    statistics.fmean(baseline.rscore[1:]),
                )
                cross = run.cross[1:] or run.cross
                ms = 1000 * statistics.median(run.seconds)
                if not zoned:
                    unaware[algorithm] = ms
                print(
                    f"{n:>10} {scenario:<22} {algorithm + (' zones' if zoned else ''):<12} {consumers:>9.1f} "
                    f"{consumers / base_consumers:>6.3f} {rscore:>7.2f} {rscore / base_rscore if base_rscore else 0:>6.2f} "
                    f"{100 * statistics.fmean(cross):>9.2f}% {100 * max(cross):>5.1f}% "
                    f"{f'{100 * statistics.fmean(run.bound[1:] or run.bound):.1f}%' if run.bound else '-':>6} "
                    f"{max(run.overloaded):>5} {ms:>8.1f} "
                    f"{f'{ms / unaware[algorithm]:.2f}' if zoned and unaware.get(algorithm) else '':>6}"
                    + (f" {1000 * statistics.median(runs[1].seconds):>9.1f}" if len(runs) > 1 else ""),
                    flush=True,
                )


if __name__ == "__main__":
    main()
