"""openapi/openapi.json generates working clients: Python (openapi-python-client) and TypeScript
(openapi-generator-cli's typescript-fetch, compiled by tsc --strict), each calling a live service for an
assignment, a version conflict (409) and a bad request (422), and reading the error envelope."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "openapi" / "openapi.json"
TYPESCRIPT = ROOT / "tests" / "typescript"


def run(argv: list[str], cwd: Path | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    ran = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert ran.returncode == 0, f"{argv[0]} failed:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"
    return ran


def test_generated_python_client(live_service, tmp_path):
    config = tmp_path / "config.json"
    # its own package name, so it never clashes with the hand-written groupfit_client
    config.write_text(
        json.dumps({"package_name_override": "groupfit_openapi", "project_name_override": "groupfit-openapi"})
    )
    package = tmp_path / "groupfit_openapi"
    run(
        [
            sys.executable,
            "-m",
            "openapi_python_client",
            "generate",
            "--path",
            str(SCHEMA),
            "--config",
            str(config),
            "--output-path",
            str(package),
            "--meta",
            "none",
        ]
    )
    group = f"py-{uuid.uuid4().hex[:8]}"
    script = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
from groupfit_openapi import Client
from groupfit_openapi.api.algorithms import list_algorithms
from groupfit_openapi.api.assignments import assign
from groupfit_openapi.models import AssignRequest, AssignResponse, ErrorResponse, PartitionRate

api = Client(base_url={live_service.url!r})
assert "mwf" in {{a.name for a in list_algorithms.sync(client=api).algorithms}}
partitions = [PartitionRate(topic="t", partition=p, rate=4.0) for p in range(5)]
answer = assign.sync(client=api, body=AssignRequest(algorithm="bfd", capacity=10.0, partitions=partitions, group={group!r}))
assert isinstance(answer, AssignResponse) and answer.consumer_count == 3 and answer.version == 1, answer
stale = assign.sync_detailed(client=api, body=AssignRequest(algorithm="bfd", capacity=10.0, partitions=partitions,
                                                            group={group!r}, expected_version=0))
assert stale.status_code == 409 and isinstance(stale.parsed, ErrorResponse), stale
assert stale.parsed.error.code == "version_conflict" and stale.parsed.error.details["current_version"] == 1
bad = assign.sync_detailed(client=api, body=AssignRequest(algorithm="bfd", capacity=10.0, partitions=[
    PartitionRate(topic="t", partition=0, rate=-1.0)]))
assert bad.status_code == 422 and bad.parsed.error.code == "invalid_rate", bad
print("ok")
"""
    assert run([sys.executable, "-c", script]).stdout.strip() == "ok"


TYPESCRIPT_PROGRAM = """
import { AlgorithmsApi, AssignmentsApi, Configuration, ResponseError } from "./client";

declare const process: { argv: string[]; exit(code: number): never };  // Node's, without @types/node

async function errorCode(call: Promise<unknown>): Promise<[number, string]> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ResponseError) {
      const body = (await error.response.json()) as { error: { code: string } };
      return [error.response.status, body.error.code];
    }
    throw error;
  }
  throw new Error("expected an error answer");
}

async function main(url: string, group: string): Promise<void> {
  const configuration = new Configuration({ basePath: url });
  const algorithms = await new AlgorithmsApi(configuration).listAlgorithms();
  if (!algorithms.algorithms.some((a) => a.name === "mwf")) throw new Error("no mwf");
  const api = new AssignmentsApi(configuration);
  const partitions = [0, 1, 2, 3, 4].map((p) => ({ topic: "t", partition: p, rate: 4 }));
  const answer = await api.assign({ assignRequest: { algorithm: "bfd", capacity: 10, partitions, group } });
  if (answer.consumerCount !== 3 || answer.version !== 1) throw new Error(JSON.stringify(answer));
  const conflict = await errorCode(
    api.assign({ assignRequest: { algorithm: "bfd", capacity: 10, partitions, group, expectedVersion: 0 } }),
  );
  const invalid = await errorCode(
    api.assign({ assignRequest: { algorithm: "bfd", capacity: 10, partitions: [{ topic: "t", partition: 0, rate: -1 }] } }),
  );
  console.log(JSON.stringify({ conflict, invalid }));
}

main(process.argv[2], process.argv[3]).catch((error) => {
  console.error(error);
  process.exit(1);
});
"""


@pytest.fixture(scope="session")
def tsc() -> Path:
    """The TypeScript compiler pinned in tests/typescript/package-lock.json, installed by npm ci once."""
    compiler = TYPESCRIPT / "node_modules" / ".bin" / "tsc"
    if not compiler.exists():
        run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT)
    return compiler


def test_generated_typescript_client_compiles_strict_and_works(live_service, tsc, tmp_path):
    project = tmp_path / "ts"
    run(
        [
            str(Path(sys.executable).parent / "openapi-generator-cli"),
            "generate",
            "-i",
            str(SCHEMA),
            "-g",
            "typescript-fetch",
            "-o",
            str(project / "client"),
            "--additional-properties=supportsES6=true",
        ]
    )
    (project / "main.ts").write_text(TYPESCRIPT_PROGRAM)
    run(
        [
            str(tsc),
            "--strict",
            "--target",
            "es2022",
            "--module",
            "commonjs",
            "--lib",
            "es2022,dom",
            "--skipLibCheck",
            "--outDir",
            str(project / "out"),
            str(project / "main.ts"),
        ]
    )
    group = f"ts-{uuid.uuid4().hex[:8]}"
    node = shutil.which("node")
    assert node, "Node.js is needed to run the compiled client"
    ran = run([node, str(project / "out" / "main.js"), live_service.url, group])
    assert json.loads(ran.stdout) == {"conflict": [409, "version_conflict"], "invalid": [422, "invalid_rate"]}
