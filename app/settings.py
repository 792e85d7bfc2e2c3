"""Every setting of the service, typed, from environment variables (GROUPFIT_*, and REDIS_URL)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class TokenGrant(BaseModel):
    """A bearer token and what it may do: read (GET), write (assign with a group, rates, delete), and on
    which groups (all when `groups` is absent); `name` tells it apart in refusals and logs (default: its place
    in the list, #1 first)."""

    token: SecretStr
    write: bool = False
    groups: list[str] | None = None
    name: str | None = Field(None, max_length=100)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GROUPFIT_", extra="ignore")

    host: str = Field("127.0.0.1", description="address `groupfit serve` binds")
    port: int = Field(8000, description="port `groupfit serve` binds")
    redis_url: str | None = Field(
        None,
        validation_alias=AliasChoices("REDIS_URL", "GROUPFIT_REDIS_URL"),
        description="Redis to keep group state in; unset: an embedded Redis-protocol server is started",
    )
    redis_cluster: bool = Field(
        False,
        description="REDIS_URL is a seed node of a Redis Cluster (also implied by a redis+cluster://h1:p1,h2:p2 URL)",
    )
    data_dir: Path = Field(Path(".groupfit"), description="where the embedded Redis keeps its data (AOF)")
    redis_timeout_s: float = Field(1.0, gt=0, description="connect and command timeout towards Redis")
    key_prefix: str = Field("groupfit", pattern=r"^[^{}]*$", description="prefix of every Redis key (no braces)")
    history_limit: int = Field(1000, ge=1, description="versions kept in a group's history")
    rates_history_limit: int = Field(
        1000, ge=0, description="rates windows kept per group for replay (each PUT of rates is one); 0: none"
    )
    rates_history_max_age_s: float = Field(7 * 86400, gt=0, description="rates windows older than this are dropped")
    rates_history_max_cells: int = Field(
        1_000_000,
        ge=1,
        description="partitions summed over a group's kept rates windows; the oldest are dropped beyond it",
    )
    rates_history_max_bytes: int = Field(
        32 * 1024 * 1024,
        ge=1024,
        description="bytes of a group's kept rates windows (as stored); the oldest are dropped beyond it",
    )
    idempotency_ttl_s: int = Field(86400, ge=1, description="how long a retried Idempotency-Key gets the same answer")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="largest request body")
    max_partitions: int = Field(1_000_000, ge=1, description="most partitions in one request")
    max_dense_cells: int = Field(1_000_000, ge=1, description="largest dense delta matrix (rows × columns)")
    max_evaluate_cells: int = Field(2_000_000, ge=1, description="most partition-measurements in POST /v1/evaluate")
    max_consumers: int = Field(
        100_000, ge=1, description="most consumers one answer may have (⌈Σ rate / C⌉, μ-based counts, members)"
    )
    max_exact_time_limit_ms: int = Field(
        2000,
        ge=10,
        description="largest time_limit_ms of the exact algorithm (also per measurement of an evaluate, and of an "
        "exact replica placement)",
    )
    max_evaluate_measurements: int = Field(1000, ge=1, description="most measurements in POST /v1/evaluate")
    max_placement_brokers: int = Field(1000, ge=1, description="most brokers in one replica placement")
    max_placement_replicas: int = Field(
        100_000, ge=1, description="most replicas (partitions × their replication factors) in one replica placement"
    )
    max_placement_cells: int = Field(
        10_000_000,
        ge=1,
        description="most replicas × brokers in one replica placement (the heuristic's work grows with it: ~10 s "
        "at the default on a busy 2-core machine)",
    )
    compute_workers: int = Field(2, ge=1, description="worker processes computing long requests")
    compute_queue: int = Field(4, ge=0, description="requests waiting for a worker beyond those running; more: 503")
    compute_timeout_s: float = Field(5.0, gt=0, description="deadline of a computation, waiting included; past it: 504")
    compute_inline_partitions: int = Field(
        1000, ge=0, description="requests of a cheap algorithm up to this size are computed in the request's process"
    )
    compute_inline_compiled: int = Field(
        20_000,
        ge=0,
        description="requests the compiled core reads and solves up to this size (partitions, previous partitions "
        "and members) are computed on the event loop (a few milliseconds at most); larger ones on a thread",
    )
    compute_tenant_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="share of the compute places (workers + queue) one token, or one group, may hold at once; "
        "at least one place",
    )
    compute_worker_memory_mb: int = Field(
        1536,
        ge=64,
        description="memory each worker process may use above its own baseline (its address space once started, "
        "measured by the worker); a request over it fails alone",
    )
    metrics_max_groups: int = Field(1000, ge=0, description="groups with their own Prometheus series; oldest dropped")
    log_level: str = Field("INFO", description="log level of the JSON logs")
    opentelemetry: bool = Field(
        False,
        description="FastAPI's native OpenTelemetry (spans, metrics, logs to the providers the operator configures);"
        " off, a request skips its checks",
    )
    core: Literal["auto", "native", "python"] = Field(
        "auto",
        description="which core computes: the compiled one (groupfit_native) when installed, always, or pure Python",
    )
    workers: int = Field(
        1, ge=1, le=64, description="uvicorn worker processes of `groupfit serve` (bench/service_http.py)"
    )
    auth_tokens: list[TokenGrant] = Field(
        default_factory=list,
        description='bearer tokens, JSON: [{"token": "…", "write": true, "groups": ["orders"]}]; empty: no authentication',
    )
    cors_origins: list[str] = Field(
        default_factory=list, description="origins allowed by CORS, JSON list; empty: CORS off"
    )

    @field_validator("redis_url")
    @classmethod
    def _cluster_seeds_parse(cls, url: str | None) -> str | None:
        """A redis+cluster:// URL whose seeds are not host:port is refused at start-up, naming the seed."""
        from app.store.connection import is_cluster_url, seed_nodes

        if url is not None and is_cluster_url(url):
            seed_nodes(url)
        return url


@lru_cache
def get_settings() -> Settings:
    return Settings()
