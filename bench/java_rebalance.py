"""Time the Java assignors add to a rebalance, for 1 000 partitions (8 topics × 125) and 20 members: the classic
leader's GroupfitAssignor.assign() through a live service (stored rates read, POST /v1/assign) and in fallback
(service down), beside Kafka's CooperativeStickyAssignor in the same JVM; and how long the broker-side
GroupfitBrokerAssignor.assign() holds the group coordinator's thread (the Java core on the rates read in the
background, the answer reported to the service by another thread; the service down from the start; a group it does
not know yet). p50/p99/max over `--runs` rebalances after as many / 2 to warm up the JVM. Builds clients/java with
Maven first (offline after the first build). bench/java_assignors.py compares the assignors alone (JMH, three sizes).

    .venv/bin/python bench/java_rebalance.py [--url http://127.0.0.1:8000] [--runs 100]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import time

from groupfit_client import GroupfitClient
from live import service_at

from app.local.java_clients import build
from app.local.kafka import java

TOPICS, PER_TOPIC, MEMBERS = 8, 125, 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url")
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    classpath = build("package -DskipTests").classpath
    rates = [
        {"topic": f"topic-{t}", "partition": p, "rate": 2.0 + (p * 7) % 40}
        for t in range(TOPICS)
        for p in range(PER_TOPIC)
    ]
    # Room for every partition on the 20 members (10 % slack), so the answer fits the group as it is.
    capacity = math.ceil(sum(r["rate"] for r in rates) / MEMBERS * 1.1)
    group = f"bench-java-{int(time.time())}"
    with service_at(args.url) as (url, _):
        GroupfitClient(url).put_rates(group, rates, "2026-11-25T10:00:00Z")
        command = [
            java(),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=error",
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka=off",
        ]
        command += ["-cp", classpath]
        command += ["io.groupfit.kafka.RebalanceBench", url, group, str(capacity), str(args.runs)]
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
