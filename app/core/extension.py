"""The compiled extension (`groupfit_native`, Rust, PyO3; source in native/), when installed: its one import,
the algorithms it runs (its own table, `ALGORITHMS`), and its fast validity check, which the model uses
(app/core/model.py). It imports nothing of app.core, so everything may import it; the solve adapter, which
reads the model and the algorithms, is app/core/native.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

module: ModuleType | None
try:
    import groupfit_native as module
except ImportError:  # no compiler where groupfit was installed: the reference core runs everything
    module = None

AVAILABLE = module is not None
ALGORITHMS: frozenset[str] = frozenset(module.ALGORITHMS if module is not None else ())
"""The algorithms the compiled core runs: the extension's own table, not restated here."""


def valid(
    keys: list[tuple[str, int]], rates: list[Any], lags: list[Any], previous: Mapping[str, Sequence[Any]]
) -> bool:
    """True when the compiled core finds the partitions and previous assignment certainly valid (rates and lags
    finite floats ≥ 0, keys distinct, previous consumers non-empty and holding distinct partitions in lists);
    False means only that the reference check (app.core.model) must run, and it says what is wrong."""
    return module is not None and module.valid(keys, rates, lags, previous)
