"""The Java clients (clients/java) built by Maven, for the tests and benchmarks that run them.

`mvn` runs offline first (every run after the first, since ~/.m2 then holds everything) and online only when
offline mode is what failed, so a build error is reported as it is, not retried.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from app.local.kafka import KafkaSetupError

PROJECT = Path(__file__).resolve().parents[2] / "clients" / "java"


@dataclass(frozen=True)
class JavaBuild:
    jar: Path
    classpath: str  # the test programs' classpath: their classes, the clients' and every dependency


def maven(*goals: str) -> subprocess.CompletedProcess:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("`mvn` is not on PATH; the Java clients need Maven (Debian: apt-get install maven)")
    command = [mvn, "-B", "-q", "-f", str(PROJECT / "pom.xml")]
    done = subprocess.run([*command, "-o", *goals], capture_output=True, text=True)
    if done.returncode != 0 and "offline mode" in done.stdout + done.stderr:
        done = subprocess.run([*command, *goals], capture_output=True, text=True)
    return done


def build(goal: str = "verify") -> JavaBuild:
    """`mvn <goal>` (verify: compile, unit tests, jar; `-DskipTests` to skip the tests) and the classpath."""
    goals = goal.split()
    done = maven(
        *goals, "dependency:build-classpath", "-Dmdep.outputFile=target/classpath.txt", "-Dmdep.includeScope=test"
    )
    if done.returncode != 0:
        raise KafkaSetupError(f"`mvn {goal}` failed on {PROJECT}:\n{(done.stdout + done.stderr)[-6000:]}")
    target = PROJECT / "target"
    (jar,) = target.glob("groupfit-kafka-*.jar")
    dependencies = (target / "classpath.txt").read_text().strip()
    return JavaBuild(jar, os.pathsep.join([str(target / "test-classes"), str(target / "classes"), dependencies]))
