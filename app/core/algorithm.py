"""The one algorithm interface and the one registry.

An algorithm is a name, a one-line description, a pydantic model of its parameters (which gives
the JSON schema and the validation), a pure function from the problem to a packing (consumer → partitions), and its traits:
its place among the paper's twelve, whether it is cheap enough for the event loop, whether the compiled
core runs it. Everything that lists or sorts algorithms derives from here. Adding an algorithm is adding
one module to `app/core/algorithms/` that calls `register`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from app.core import extension
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import Problem


class NoParams(BaseModel):
    """Parameters of an algorithm that takes none."""

    model_config = ConfigDict(extra="forbid")


@dataclass
class Packing:
    """What an algorithm returns: consumer id → partition indices, and its own outputs."""

    assignment: dict[str, list[int]]
    outputs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Algorithm:
    name: str
    description: str
    pack: Callable[[Problem, Any], Packing]
    params: type[BaseModel] = NoParams
    source: str = ""
    paper: int | None = None
    """Its place among the twelve algorithms of Landau et al. §VI-A, in the paper's order (1 = nf … 12 = mbfp);
    None: not one of them."""
    cheap: bool = False
    """Its work grows as n log n with the request's size, with no search budget: a request of up to
    GROUPFIT_COMPUTE_INLINE_PARTITIONS is computed on the event loop (about a millisecond; a compute worker's
    round trip would cost more)."""

    @property
    def compiled(self) -> bool:
        """Whether the compiled core runs it: the extension's own table (`groupfit_native.ALGORITHMS`)."""
        return self.name in extension.ALGORITHMS

    def parse_params(self, raw: Mapping[str, Any] | None) -> BaseModel:
        try:
            return self.params.model_validate(raw or {}, strict=True)  # "100" is not a number of milliseconds
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "params"
            raise AssignmentError(
                ErrorCode.INVALID_PARAMETER,
                f"parameter {where!r} of algorithm {self.name!r}: {first['msg']}.",
                {"errors": [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]},
            ) from None

    def params_schema(self) -> dict[str, Any]:
        return self.params.model_json_schema()


_REGISTRY: dict[str, Algorithm] = {}
_loaded = False


def register(algorithm: Algorithm) -> Algorithm:
    if algorithm.name in _REGISTRY:
        raise ValueError(f"algorithm {algorithm.name!r} is registered twice")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def _load_all() -> None:
    import app.core.algorithms as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def algorithms() -> dict[str, Algorithm]:
    """The registry, every module of `app/core/algorithms/` loaded: the paper's twelve in the paper's order,
    then the others by name (whatever order their modules were imported in)."""
    global _loaded
    if not _loaded:
        _load_all()
        ordered = sorted(_REGISTRY.values(), key=lambda a: (a.paper is None, a.paper or 0, a.name))
        _REGISTRY.clear()
        _REGISTRY.update((a.name, a) for a in ordered)
        _loaded = True
    return _REGISTRY


def paper_algorithms() -> list[str]:
    """The twelve algorithms of Landau et al. §VI-A, in the paper's order."""
    return [a.name for a in algorithms().values() if a.paper is not None]


def get_algorithm(name: str) -> Algorithm:
    registry = algorithms()
    try:
        return registry[name]
    except KeyError:
        known = sorted(registry)
        raise AssignmentError(
            ErrorCode.UNKNOWN_ALGORITHM,
            f"unknown algorithm {name!r}; choose one of: {', '.join(known)}.",
            {"algorithms": known},
        ) from None
