"""The deployment files, checked offline: docker-compose.yml by the Docker Compose binary, the Dockerfiles by
hadolint and by their shape, the Kubernetes manifests against Kubernetes' schemas (kubernetes-validate,
strict), and all of them against the code they run: every command line parses with the parser of the
program it starts, files copied into images exist, versions agree."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import compose
import kubernetes_validate
import pytest
import yaml

from app.cli import build_parser
from app.local.demo import parts_parser

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = [ROOT / "deploy" / "Dockerfile", ROOT / "deploy" / "spark" / "Dockerfile"]
AUTOSCALING = sorted((ROOT / "deploy" / "k8s" / "autoscaling").glob("*.yaml"))
MANIFESTS = [
    *sorted((ROOT / "deploy" / "k8s").glob("*.yaml")),
    ROOT / "deploy" / "spark" / "sparkapplication.yaml",
    *AUTOSCALING,
]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def compose_services() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]


def documents() -> list[dict]:
    return [d for path in MANIFESTS for d in yaml.safe_load_all(path.read_text()) if d]


def spark_version() -> str:
    return re.search(r"^ARG SPARK_VERSION=(\S+)", DOCKERFILES[1].read_text(), re.MULTILINE).group(1)


def rates_job_args(command: list[str]) -> list[str]:
    """The job's own options in a spark-submit command line: what follows rates_job.py."""
    script = next(i for i, arg in enumerate(command) if arg.endswith("rates_job.py"))
    return command[script + 1 :]


def parse_rates_job(args: list[str]):
    return build_parser().parse_args(["rates-job", *args])


def declared_flags(source: Path) -> set[str]:
    """The --flags a script declares with argparse (for programs whose parser is built inside main())."""
    return set(re.findall(r"add_argument\(\s*\"(--[a-z0-9-]+)\"", source.read_text()))


# -- docker-compose.yml ------------------------------------------------------------------


def test_compose_file_is_valid_for_docker_compose():
    binary = Path(compose.__file__).parent / "docker-compose"  # the binary itself: its wrapper loses the exit code
    checked = subprocess.run(
        [str(binary), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_compose_stack_comes_up_in_order():
    services = compose_services()
    assert set(services) == {"kafka", "redis", "api", "rates-job", "producer", "consumers"}
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    assert services["redis"]["image"].startswith("redis:")
    assert services["redis"]["command"][services["redis"]["command"].index("--appendonly") + 1] == "yes"
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])
    for name in ("kafka", "redis", "api"):
        assert services[name]["healthcheck"]["test"], name
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])
    expected = {"api": {"redis"}, "rates-job": {"kafka", "api"}, "producer": {"kafka"}, "consumers": {"kafka", "api"}}
    for name, needs in expected.items():
        depends = services[name]["depends_on"]
        assert set(depends) == needs, name
        assert all(depends[n]["condition"] == "service_healthy" for n in needs), name


def test_compose_services_run_what_the_code_accepts():
    services = compose_services()
    assert services["api"]["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert services["api"]["environment"]["GROUPFIT_HOST"] == "0.0.0.0"
    for name in ("api", "producer", "consumers"):
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile", name
        assert services[name]["image"] == f"groupfit:{VERSION}", name

    job = services["rates-job"]
    assert job["build"]["dockerfile"] == "deploy/spark/Dockerfile"
    command = job["command"]
    assert command[0].endswith("spark-submit")
    assert command[command.index("--packages") + 1] == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"
    options = parse_rates_job(rates_job_args(command))
    assert (options.source, options.bootstrap_servers, options.service_url) == (
        "kafka",
        "kafka:9092",
        "http://api:8000",
    )
    assert options.checkpoint_dir.startswith(next(v.split(":")[1] for v in job["volumes"]))

    produce = parts_parser().parse_args(services["producer"]["entrypoint"][3:])
    consume = parts_parser().parse_args(services["consumers"]["entrypoint"][3:])
    assert (
        services["producer"]["entrypoint"][:3]
        == services["consumers"]["entrypoint"][:3]
        == ["python", "-m", "app.local.demo"]
    )
    assert produce.topic == consume.topic == options.topics
    assert consume.group == options.consumer_group and consume.service_url == options.service_url


# -- Dockerfiles ---------------------------------------------------------------------------


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_passes_hadolint(dockerfile):
    hadolint = Path(sys.executable).parent / "hadolint"
    checked = subprocess.run(
        [str(hadolint), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_runs_as_non_root_and_copies_what_the_context_holds(dockerfile):
    text = dockerfile.read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert not re.search(r"^ADD\s", text, re.MULTILINE)  # COPY only: no remote URLs, no implicit unpacking
    # .dockerignore excludes everything but what it re-includes; every COPY from the context must be there.
    included = [
        line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")
    ]
    for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.MULTILINE):
        *sources, _ = shlex.split(line)
        for source in sources:
            assert (ROOT / source).exists(), source
            assert any(source == i or source.startswith(i + "/") for i in included), (
                f"{source} is not in the build context"
            )


def test_api_image_is_multi_stage_with_a_healthcheck():
    text = DOCKERFILES[0].read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2
    assert re.search(r"^COPY --from=" + stages[0], text, re.MULTILINE)
    assert re.search(r"^HEALTHCHECK .*/healthz", text, re.MULTILINE | re.DOTALL)
    assert re.search(r'^ENTRYPOINT \["groupfit"\]', text, re.MULTILINE)


# -- Kubernetes ------------------------------------------------------------------------------


def test_manifests_match_the_kubernetes_schemas():
    checked = 0
    for document in documents():
        if document["apiVersion"].startswith(("sparkoperator.k8s.io/", "keda.sh/")):
            continue  # a custom resource: no schema offline; checked below against the code instead
        kubernetes_validate.validate(document, "1.30", strict=True)
        checked += 1
    assert checked >= 10


def pod_specs() -> list[tuple[dict, dict]]:
    """(workload, pod template) for every Deployment and StatefulSet."""
    return [(d, d["spec"]["template"]) for d in documents() if d["kind"] in ("Deployment", "StatefulSet")]


def test_workloads_select_their_pods_and_run_unprivileged():
    workloads = pod_specs()
    assert {w["metadata"]["name"] for w, _ in workloads} == {"groupfit", "orders-consumers", "events-controller"}
    for workload, template in workloads:
        labels = template["metadata"]["labels"]
        assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
        for container in template["spec"]["containers"]:
            assert container["image"] == f"groupfit:{VERSION}"
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
    pods = [(w["metadata"]["namespace"], t["metadata"]["labels"]) for w, t in workloads]
    for document in documents():
        selector = {
            "Service": lambda d: d["spec"]["selector"],
            "PodDisruptionBudget": lambda d: d["spec"]["selector"]["matchLabels"],
        }.get(document["kind"])
        if selector:
            namespace = document["metadata"]["namespace"]
            assert any(ns == namespace and selector(document).items() <= labels.items() for ns, labels in pods), (
                f"{document['kind']} {document['metadata']['name']} selects no pods"
            )


def test_api_deployment_probes_service_autoscaler_and_budget_agree():
    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents()}
    api = by_kind["Deployment", "groupfit"]
    container = api["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["port"] in ports
    assert container["livenessProbe"]["httpGet"]["port"] in ports
    config = by_kind["ConfigMap", "groupfit"]["data"]
    assert container["envFrom"][0]["configMapRef"]["name"] == "groupfit"
    assert int(config["GROUPFIT_PORT"]) == ports["http"] and config["GROUPFIT_HOST"] == "0.0.0.0"
    assert {e["name"] for e in container["env"]} == {"REDIS_URL"}  # from a Secret, never in the manifests
    service = by_kind["Service", "groupfit"]
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    hpa = by_kind["HorizontalPodAutoscaler", "groupfit"]["spec"]
    assert (hpa["scaleTargetRef"]["kind"], hpa["scaleTargetRef"]["name"]) == ("Deployment", "groupfit")
    assert hpa["minReplicas"] >= 2  # with the budget below, a voluntary disruption never takes the API down
    assert by_kind["PodDisruptionBudget", "groupfit"]["spec"]["minAvailable"] < hpa["minReplicas"]
    assert api["spec"]["replicas"] == hpa["minReplicas"]  # several replicas from the start, as the HPA keeps


def test_api_config_map_holds_valid_settings_only():
    """Every key of the API's ConfigMap is a setting, and the values parse (e.g. GROUPFIT_REDIS_CLUSTER)."""
    from app.settings import Settings

    config = next(d for d in documents() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "groupfit")["data"]
    fields = {name: f"GROUPFIT_{name.upper()}" for name in Settings.model_fields}
    assert set(config) <= set(fields.values())
    settings = Settings(**{name: config[env] for name, env in fields.items() if env in config})
    assert settings.redis_cluster is False and settings.port == 8000


def test_consumer_workloads_run_the_client_with_options_it_declares():
    by_name = {w["metadata"]["name"]: t["spec"]["containers"][0] for w, t in pod_specs()}
    assignor = by_name["orders-consumers"]
    assert assignor["command"] == ["python", "/opt/groupfit/examples/consume.py"]  # COPY clients/python/examples
    example = ROOT / "clients" / "python" / "examples" / "consume.py"
    assert {a for a in assignor["args"] if a.startswith("--")} <= declared_flags(example)
    assert "$(POD_NAME)" in assignor["args"]

    controller = by_name["events-controller"]
    assert controller["command"] == ["python", "-m", "groupfit_client.controller", "controller"]
    module = ROOT / "clients" / "python" / "groupfit_client" / "controller" / "__main__.py"
    assert {a for a in controller["args"] if a.startswith("--")} <= declared_flags(module)
    controller_deployment = next(w for w, _ in pod_specs() if w["metadata"]["name"] == "events-controller")
    assert controller_deployment["spec"]["replicas"] == 1
    assert controller_deployment["spec"]["strategy"]["type"] == "Recreate"  # never two controllers at once


def test_spark_application_runs_the_job_in_the_spark_image():
    application = next(d for d in documents() if d["kind"] == "SparkApplication")["spec"]
    assert application["sparkVersion"] == spark_version()
    assert application["deps"]["packages"] == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"]
    assert application["image"] == compose_services()["rates-job"]["image"]
    script = application["mainApplicationFile"].removeprefix("local://")
    assert re.search(rf"^COPY deploy/spark/rates_job.py {re.escape(script)}$", DOCKERFILES[1].read_text(), re.MULTILINE)
    options = parse_rates_job(application["arguments"])
    assert options.source == "kafka" and options.checkpoint_dir.startswith("/checkpoints/")
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in application["volumes"]}
    assert set(claims.values()) <= {d["metadata"]["name"] for d in documents() if d["kind"] == "PersistentVolumeClaim"}
    for role in ("driver", "executor"):
        assert {m["name"] for m in application[role]["volumeMounts"]} <= set(claims)
    accounts = {d["metadata"]["name"] for d in documents() if d["kind"] == "ServiceAccount"}
    assert application["driver"]["serviceAccount"] in accounts


def test_spark_submit_script_passes_the_job_its_options():
    script = (ROOT / "deploy" / "spark" / "submit.sh").read_text()
    assert f"spark-sql-kafka-0-10_2.13:{spark_version()}" in script
    assert re.search(r'rates_job\.py" --source kafka --master "\$SPARK_MASTER" "\$@"', script)
    assert (
        parse_rates_job(["--source", "kafka", "--master", "spark://master:7077", "--topics", "t"]).master
        == "spark://master:7077"
    )


def submitted(tmp_path: Path, **env: str) -> list[str]:
    """The command line deploy/spark/submit.sh gives spark-submit (a stand-in on PATH that prints it)."""
    (tmp_path / "spark-submit").write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    (tmp_path / "spark-submit").chmod(0o755)
    ran = subprocess.run(
        ["bash", str(ROOT / "deploy" / "spark" / "submit.sh"), "--topics", "t"],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin", "SPARK_MASTER": "spark://m:7077", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return ran.stdout.splitlines()


def test_spark_submit_script_takes_the_connector_from_jars_or_packages(tmp_path):
    """SPARK_KAFKA_JARS goes to --jars (and nothing is fetched); without it the connector's coordinates go to
    --packages; with neither (SPARK_KAFKA_PACKAGES="") the connector is left out, for `--source python`."""
    coordinates = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version()}"
    with_jars = submitted(tmp_path, SPARK_KAFKA_JARS="/j/spark-sql-kafka.jar,/j/kafka-clients.jar")
    assert with_jars[with_jars.index("--jars") + 1] == "/j/spark-sql-kafka.jar,/j/kafka-clients.jar"
    assert "--packages" not in with_jars
    assert parse_rates_job(rates_job_args(with_jars)).source == "kafka"
    fetched = submitted(tmp_path)
    assert fetched[fetched.index("--packages") + 1] == coordinates and "--jars" not in fetched
    without = submitted(tmp_path, SPARK_KAFKA_PACKAGES="")
    assert "--packages" not in without and "--jars" not in without


def test_deploy_runs_the_kafka_and_the_connector_the_tests_run():
    """The tests start Apache Kafka and load Spark's Kafka connector from deploy/kafka/pom.xml for the installed
    PySpark; compose, the Spark image and its manifests name the same Kafka, the same Spark minor and the
    connector coordinates the pom resolves."""
    import pyspark

    from app.local.kafka import KAFKA_VERSION, pom_property

    assert compose_services()["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}"
    deployed = spark_version()
    assert deployed.split(".")[:2] == pyspark.__version__.split(".")[:2]
    assert pom_property("spark.version") == deployed
    pom = (ROOT / "deploy" / "kafka" / "pom.xml").read_text()
    assert "<artifactId>spark-sql-kafka-0-10_${scala.binary.version}</artifactId>" in pom
    coordinates = f"org.apache.spark:spark-sql-kafka-0-10_{pom_property('scala.binary.version')}:{deployed}"
    job = compose_services()["rates-job"]["command"]
    application = next(d for d in documents() if d["kind"] == "SparkApplication")["spec"]
    assert job[job.index("--packages") + 1] == coordinates
    assert application["deps"]["packages"] == [coordinates]
    assert f"SPARK_KAFKA_PACKAGES-{coordinates}}}" in (ROOT / "deploy" / "spark" / "submit.sh").read_text()
    # The connector is the job's default source; the files say so anyway, so a changed default cannot move them.
    assert parse_rates_job(["--topics", "t"]).source == "kafka"


def test_keda_scales_the_consumers_on_the_services_scaling_signal():
    from app.codec.operations import ScaleSignal

    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents()}
    scaled = by_kind["ScaledObject", "orders-consumers"]["spec"]
    target = scaled["scaleTargetRef"]
    consumers = by_kind[target["kind"], target["name"]]
    assert consumers["metadata"]["namespace"] == "groupfit" and target["apiVersion"] == consumers["apiVersion"]
    (trigger,) = scaled["triggers"]
    assert trigger["type"] == "metrics-api" and trigger["metricType"] == "AverageValue"
    meta = trigger["metadata"]
    assert float(meta["targetValue"]) == 1  # `needed` consumers → that many replicas
    assert meta["valueLocation"] in ScaleSignal.__struct_fields__
    assert ScaleSignal.__annotations__[meta["valueLocation"]].startswith("Annotated[int")
    url = re.fullmatch(r"http://([a-z0-9-]+)\.([a-z0-9-]+):(\d+)(/v1/groups/[^/]+/scale)", meta["url"])
    assert url, meta["url"]
    service = by_kind["Service", url.group(1)]
    assert service["metadata"]["namespace"] == url.group(2)
    assert int(url.group(3)) in {p["port"] for p in service["spec"]["ports"]}
    assert url.group(4) == "/v1/groups/orders/scale"  # the group the consumers join (--group orders)
    assert "/v1/groups/{group}/scale" in json.loads((ROOT / "openapi" / "openapi.json").read_text())["paths"]
    container = consumers["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][container["args"].index("--group") + 1] == "orders"
    assert meta["authMode"] == "bearer"
    auth = by_kind["TriggerAuthentication", trigger["authenticationRef"]["name"]]["spec"]
    assert [ref["parameter"] for ref in auth["secretTargetRef"]] == ["token"]
    assert scaled["maxReplicaCount"] >= scaled["minReplicaCount"] >= 1


def test_prometheus_hpa_scales_on_the_exported_gauge():
    from app.api.observability import Metrics

    by_kind = {(d["kind"], d["metadata"]["name"]): d for d in documents() if d in autoscaling_documents()}
    hpa = by_kind["HorizontalPodAutoscaler", "orders-consumers"]["spec"]
    keda = by_kind["ScaledObject", "orders-consumers"]["spec"]
    assert hpa["scaleTargetRef"] == keda["scaleTargetRef"]  # the same workload: apply one of the two
    (metric,) = hpa["metrics"]
    external = metric["external"]
    gauge = next(m for m in Metrics().registry.collect() if m.name == external["metric"]["name"])
    assert gauge.type == "gauge"
    assert external["metric"]["selector"]["matchLabels"] == {"group": "orders"}
    assert external["target"] == {"type": "AverageValue", "averageValue": "1"}
    adapter = yaml.safe_load(by_kind["ConfigMap", "prometheus-adapter-groupfit"]["data"]["config.yaml"])
    (rule,) = adapter["externalRules"]
    assert rule["name"]["as"] == gauge.name and gauge.name in rule["seriesQuery"] and gauge.name in rule["metricsQuery"]


def autoscaling_documents() -> list[dict]:
    return [d for path in AUTOSCALING for d in yaml.safe_load_all(path.read_text()) if d]


# -- architecture picture --------------------------------------------------------------------


def test_architecture_picture_shows_every_label_of_its_source():
    source = (ROOT / "deploy" / "architecture.dot").read_text()
    picture = (ROOT / "deploy" / "architecture.svg").read_text()
    assert picture.lstrip().startswith(("<?xml", "<svg"))
    drawn = {html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", picture)}
    lines = {line for label in re.findall(r'label="([^"]*)"', source) for line in label.split("\\n")}
    assert len(lines) > 20
    assert lines <= drawn, f"re-render deploy/architecture.svg: {sorted(lines - drawn)}"
