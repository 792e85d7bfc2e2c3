"""The deployment files: docker-compose.yml validated by the Docker Compose binary, the Dockerfile's
shape, the Kubernetes manifests' consistency, the architecture picture's source."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import compose
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_compose_file_is_valid_for_docker_compose():
    binary = Path(compose.__file__).parent / "docker-compose"  # the binary itself: its wrapper loses the exit code
    checked = subprocess.run([str(binary), "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert checked.returncode == 0, checked.stderr


def test_compose_stack_comes_up_in_order():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert {"kafka", "redis", "api", "rates-job", "producer", "consumers"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert "broker,controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]
    assert "--appendonly" in services["redis"]["command"]
    for name in ("kafka", "redis", "api"):
        assert "healthcheck" in services[name], name
    assert services["api"]["depends_on"]["redis"]["condition"] == "service_healthy"
    for name in ("rates-job", "consumers"):
        assert services[name]["depends_on"]["api"]["condition"] == "service_healthy"


def test_dockerfile_is_multi_stage_and_non_root():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE)
    assert len(stages) >= 2
    user = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert user and not user[-1].startswith(("root", "0"))
    assert "HEALTHCHECK" in text and not re.search(r"^ADD\s+https?://", text, re.MULTILINE)
    for copied in re.findall(r"^COPY\s+(?:--\S+\s+)?(\S+)", text, re.MULTILINE):
        assert copied.startswith("/") or (ROOT / copied).exists(), copied


def test_kubernetes_manifests_are_consistent():
    documents = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "groupfit.yaml").read_text()) if d]
    kinds = {d["kind"]: d for d in documents}
    assert {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget", "StatefulSet"} <= set(kinds)
    for d in documents:
        assert d["apiVersion"] and d["metadata"]["name"]
    api = kinds["Deployment"]
    labels = api["spec"]["template"]["metadata"]["labels"]
    assert api["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert kinds["Service"]["spec"]["selector"].items() <= labels.items()
    assert kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    container = api["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert kinds["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] == api["metadata"]["name"]
    spark = yaml.safe_load((ROOT / "deploy" / "spark" / "sparkapplication.yaml").read_text())
    assert spark["kind"] == "SparkApplication" and spark["spec"]["mainApplicationFile"].endswith("rates_job.py")
    assert (ROOT / "deploy" / "spark" / "rates_job.py").exists()


def test_architecture_picture_is_drawn_from_its_source():
    source, picture = ROOT / "deploy" / "architecture.dot", ROOT / "deploy" / "architecture.svg"
    assert source.exists() and picture.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "groupfit" in picture.read_text()
