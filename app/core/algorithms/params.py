"""Parameter pieces several algorithms share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PartitionRef(BaseModel):
    """A partition named in an algorithm's parameters; it must be one of the request's partitions."""

    model_config = ConfigDict(extra="forbid")
    topic: str
    partition: int
