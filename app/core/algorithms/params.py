"""Parameter pieces several algorithms share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PartitionRef(BaseModel):
    """A partition named in an algorithm's parameters; it must be one of the request's partitions."""

    model_config = ConfigDict(extra="forbid")
    topic: str
    partition: int


class FixedGroup(BaseModel):
    """Without members: how many consumers (default: as many as the previous assignment had, or the
    lower bound ⌈Σ rate / C⌉ for a new group)."""

    model_config = ConfigDict(extra="forbid")
    consumers: int | None = Field(None, ge=1, le=100_000)
