"""The latency model of Landau et al. §VI-C (Eq. 16-27), exact over every byte without one sample per byte.

Per consumer c and iteration k, the partitions it keeps form a fixed queue (P_F, Eq. 17) and those it
starts a rebalanced queue (P_R, Eq. 16). Over an iteration of T seconds the fixed queue receives
T·W_F bytes (Eq. 18, 21); byte i waits L_F(i) = max(m_F·i + b_F, 0) (Eq. 22) with m_F = 1/R_F − 1/W_F
(Eq. 19) and b_F the latency its last byte had at the end of the previous iteration (Eq. 20). The
rebalanced queue cannot be read before the rebalance ends: L_R(i) = max(m_R·i + t_r, 0) (Eq. 27). The
consumer reads the fixed queue at R_F = C̄ when nothing was rebalanced to it, else at min(C̄, W_F), and
the rebalanced queue with what is left, R_R = C̄ − R_F.

Every queue-iteration is a line segment of latencies over its bytes, so the latency of all bytes is a
mixture of uniform distributions over segments: percentiles are found by bisection on the latency value
(to 1e-9 relative), the CDF by measuring each segment's bytes at or below a value.

Two choices the text leaves open:
- The first iteration. Δ(k), hence P_R and P_F, exist for k > 1 (Eq. 9, 16-17), so latency is measured
  from the second iteration on, with no backlog. This reproduces kd_15's published 364.66 s to 0.02 %;
  counting the first iteration as a rebalance of every partition gives 363.53 s.
- A starved rebalanced queue. When a consumer keeps at least C̄ (possible only if C ≥ C̄ or for an
  assignment that ignores rates) and also starts partitions, R_R = C̄ − R_F = 0: the model never reads
  those bytes, so their latency is unbounded (+inf) rather than a number the text does not define.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.core.assign import Outcome
from app.core.errors import AssignmentError, ErrorCode

THROUGHPUT_PER_CAPACITY = 133.0 / 100.0
"""C̄/C of the paper's evaluation (§VI-C): the model's default for a group whose C̄ is not given."""

PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}


@dataclass(frozen=True)
class LatencyModel:
    consumer_throughput: float = 133.0  # C̄, in the rates' unit
    iteration_s: float = 30.0
    rebalance_s: float = 5.0

    def __post_init__(self) -> None:
        valid = {
            "consumer_throughput": self.consumer_throughput > 0,
            "iteration_s": self.iteration_s > 0,
            "rebalance_s": self.rebalance_s >= 0,
        }
        for name, ok in valid.items():
            value = getattr(self, name)
            if not ok or not math.isfinite(value):
                bound = "≥ 0" if name == "rebalance_s" else "> 0"
                raise AssignmentError(
                    ErrorCode.INVALID_PARAMETER, f"latency {name} must be a finite number {bound}; got {value}."
                )


@dataclass
class Segments:
    """Latency segments: byte i of a segment (0 ≤ i < length) waits max(slope·i + start, 0) seconds.
    A slope of +inf marks a queue that is never read (every byte but a null set unbounded)."""

    slope: np.ndarray
    start: np.ndarray
    length: np.ndarray

    @property
    def bytes(self) -> float:
        return float(self.length.sum())

    def end(self) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.maximum(self.slope * self.length + self.start, 0.0)

    def finite_max(self) -> float:
        """The largest bounded latency (0 when there are no bytes)."""
        ends = self.end()
        return float(max(self.start.max(initial=0.0), ends[np.isfinite(ends)].max(initial=0.0)))

    def count_at_most(self, value: float) -> float:
        """Bytes whose latency is at most `value` (≥ 0)."""
        m, b, n = self.slope, self.start, self.length
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = (value - b) / m  # where m·i + b = value (0 for m = +inf: nothing but byte 0)
        flat = np.where(b <= value, n, 0.0)
        rising = np.clip(cross, 0.0, n)  # m > 0: bytes before the crossing
        falling = n - np.clip(cross, 0.0, n)  # m < 0: bytes after the crossing
        counted = np.where(m > 0, rising, np.where(m < 0, falling, flat))
        return float(counted.sum())

    def quantile(self, q: float) -> float:
        """The smallest latency at or below which a share q of all bytes lies (+inf if unbounded)."""
        total = self.bytes
        if total == 0 or self.count_at_most(0.0) >= q * total:
            return 0.0
        low, high = 0.0, self.finite_max()
        if self.count_at_most(high) < q * total * (1 - 1e-12):
            return math.inf
        while high - low > 1e-9 * max(1.0, high):
            middle = (low + high) / 2
            if self.count_at_most(middle) >= q * total:
                high = middle
            else:
                low = middle
        return high

    def summary(self) -> dict[str, float]:
        """p50, p90, p95, p99 and max in seconds, and the bytes that waited at all."""
        figures = {name: self.quantile(q) for name, q in PERCENTILES.items()}
        figures["max"] = math.inf if np.isinf(self.slope).any() else self.finite_max()
        figures["above_zero"] = self.bytes - self.count_at_most(0.0)
        return figures


@dataclass(frozen=True)
class Owners:
    """What the model reads of a replay: each measurement's partitions, measurement after measurement and each
    in its listing order, with its rate, its consumer and its previous consumer (numbers of `consumers`; -1 for
    a new partition)."""

    counts: np.ndarray  # partitions per measurement
    rates: np.ndarray
    owner: np.ndarray
    previous: np.ndarray
    consumers: list[str]

    @classmethod
    def of_names(
        cls, counts: Sequence[int], rates: Sequence[float], owner: Sequence[str], previous: Sequence[str | None]
    ) -> Owners:
        """From consumer ids (None: a new partition), numbered in the order they appear."""
        numbers: dict[str, int] = {}
        owned = [numbers.setdefault(c, len(numbers)) for c in owner]
        held = [-1 if c is None else numbers.setdefault(c, len(numbers)) for c in previous]
        return cls(
            np.array(counts, dtype=np.int64),
            np.array(rates, dtype=float),
            np.array(owned, dtype=np.int64),
            np.array(held, dtype=np.int64),
            list(numbers),
        )

    @classmethod
    def of_outcomes(cls, outcomes: Sequence[Outcome]) -> Owners:
        """From outcomes, each of one measurement (its problem holds the rates and the previous assignment)."""
        return cls.of_names(
            [outcome.problem.size for outcome in outcomes],
            [rate for outcome in outcomes for rate in outcome.problem.rates],
            [c for outcome in outcomes for c in outcome.owner],
            [c for outcome in outcomes for c in outcome.problem.previous_owner],
        )


def segments(replayed: Owners | Sequence[Outcome], model: LatencyModel = LatencyModel()) -> Segments:
    """The latency segments of a replay (its owners, or its outcomes), in one order whatever the consumers'
    numbers: (slope, start, length) ascending."""
    owners = replayed if isinstance(replayed, Owners) else Owners.of_outcomes(replayed)
    c_bar, period, t_r = model.consumer_throughput, model.iteration_s, model.rebalance_s
    slopes: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    size = len(owners.consumers)
    backlog = np.zeros(size)  # b_F: latency of the fixed queue's last byte, per consumer
    ends = np.cumsum(owners.counts)
    for k in range(1, len(ends)):  # from the second iteration (module docstring)
        window = slice(ends[k - 1], ends[k])
        owner, rates = owners.owner[window], owners.rates[window]
        kept = owner == owners.previous[window]
        w_fixed = np.bincount(owner[kept], rates[kept], size)  # Eq. 17-18
        w_moved = np.bincount(owner[~kept], rates[~kept], size)  # Eq. 16, 24
        r_fixed = np.where(w_moved == 0, c_bar, np.minimum(c_bar, w_fixed))
        r_moved = c_bar - r_fixed
        fixed, moved = w_fixed > 0, w_moved > 0
        with np.errstate(divide="ignore"):
            m = 1 / r_fixed[fixed] - 1 / w_fixed[fixed]  # Eq. 19; r_fixed > 0 as w_fixed > 0
            n = period * w_fixed[fixed]  # Eq. 21
            slopes.append(m)
            starts.append(backlog[fixed])
            lengths.append(n)
            carried = np.zeros(size)
            carried[fixed] = np.maximum(m * n + backlog[fixed], 0.0)  # Eq. 20 for the next iteration
            starved = r_moved[moved] <= 0
            slopes.append(np.where(starved, math.inf, 1 / r_moved[moved] - 1 / w_moved[moved]))  # Eq. 25; inf: starved
        starts.append(np.full(int(moved.sum()), t_r))
        lengths.append(period * w_moved[moved])  # Eq. 26
        backlog = carried
    if not slopes:
        return Segments(np.array([]), np.array([]), np.array([]))
    slope, start, length = np.concatenate(slopes), np.concatenate(starts), np.concatenate(lengths)
    order = np.lexsort((length, start, slope))
    return Segments(slope[order], start[order], length[order])
