"""Whether a consumer group should change, and how: `up`, `down`, `reass` or `none`, with the reason — the
scaleNeeded of Ezzeddine et al. (Procedure 1, with Algorithm 1's assignmentViolatesTheSLA and line 12's
"trigger a rebalance"), for any registered algorithm.

least-loaded answers by its own Procedure 1 (`outputs.scale_action`). Any other algorithm is asked, by
ordinary runs of it, what the seed asks of Least-Loaded:
- up: packing the rates into consumers of f_up·C, it uses more consumers than the group has;
- down: packing them into the smaller consumers of f_down·C, it still uses fewer (the hysteresis: a group
  sized at f_up·C is not sized down until its load would fit fewer consumers of f_down·C, so it does not flap);
- reass: neither, but the stored assignment violates — a member above f_up × its capacity, or a partition
  no member holds — and the algorithm run on the same members removes enough of the excess.
Every `reass` passes the guards against rebalance storms: the stored assignment is at least min_interval_s
old, the proposal's gain reaches min_gain, and it moves no more than max_rscore / max_moves. The proposal is
computed as the group's leader will compute it at the rebalance (same algorithm, parameters and members), so
a budget the algorithm itself should honour belongs in its parameters.

Excess, the measure of a violation and of the gain: the load above f_up × each member's capacity, in units of
a consumer's capacity (the rate unit is μ for least-loaded, C otherwise; least-loaded adds its lag dimension,
in units of μ·w_sla), plus the rate of the partitions no member holds. Gain = excess now − excess after.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.algorithm import Algorithm, get_algorithm
from app.core.assign import Outcome, solve
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import MAX_CONSUMERS, ROUNDING, PartitionKey, build_problem, sorted_consumers

LEAST_LOADED = "least-loaded"
FALLBACK_ALGORITHM = "bfd"
"""Sizes a group whose own algorithm cannot run without members (kip441, Kafka's assignors): the fewest
consumers of the Any Fit family (Landau et al. §VI-D)."""

F_UP = 1.0
"""Default f_up of an algorithm other than least-loaded: its capacity C is already the load a consumer is
given (least-loaded has its own defaults, 0.9 and 0.4, from the seed)."""
F_DOWN = 0.7
MIN_GAIN = 0.05
"""A reassignment must remove at least this much excess (5 % of a consumer's capacity) to be worth a rebalance."""


@dataclass(frozen=True)
class Guards:
    """What the caller sets of the decision. f_up / f_down: for least-loaded its own parameters (given here or
    in its params), for the others the decision's (default 1 and 0.7)."""

    f_up: float | None = None
    f_down: float | None = None
    min_gain: float = MIN_GAIN
    max_rscore: float | None = None
    max_moves: int | None = None
    min_interval_s: float = 0.0


@dataclass(frozen=True)
class GroupState:
    """What the decision reads of a group: its latest rates, its stored assignment and capacity."""

    keys: list[PartitionKey]
    rates: list[float]
    lags: list[float | None]
    capacity: float
    assignment: Mapping[str, Sequence[PartitionKey]]
    """member → partitions (members holding none included): the group's members."""
    member_capacities: Mapping[str, float] = field(default_factory=dict)
    assignment_age_s: float = math.inf


@dataclass
class Decision:
    action: str
    reason: str
    algorithm: str
    """the algorithm that sized the group (bfd where the group's own cannot size without members)"""
    needed: int
    """consumers the action leads to: more (up), fewer (down), else the group's own count"""
    current: int
    lower_bound: int
    total_rate: float
    overloaded: list[str]
    unowned: int
    remove: list[str] = field(default_factory=list)
    """on down: the members the smaller packing leaves out, in the algorithm's own naming"""
    rscore: float | None = None
    moves: int | None = None
    gain: float | None = None


@dataclass(frozen=True)
class _Units:
    """How excess is measured: a member of capacity s·C may carry f·rate·s of rate and f·lag·s of lag."""

    capacity: float
    rate: float
    lag: float | None  # None: lag is not judged (any algorithm but least-loaded)
    f: float


class _View:
    """The group's partitions (those of the topics its stored assignment reads) indexed once, and the problem of
    a rebalance among its members (built here, so bad rates or member capacities are refused first)."""

    def __init__(self, state: GroupState, max_consumers: int) -> None:
        topics = {topic for held in state.assignment.values() for topic, _ in held}
        kept = [j for j, (topic, _) in enumerate(state.keys) if topic in topics]
        self.keys = [state.keys[j] for j in kept]
        self.rates = [state.rates[j] for j in kept]
        self.lags = [state.lags[j] for j in kept]
        index = {key: j for j, key in enumerate(self.keys)}
        self.members = sorted_consumers(state.assignment)
        self.held = {m: [index[key] for key in state.assignment[m] if key in index] for m in self.members}
        self.previous = {m: [self.keys[j] for j in self.held[m]] for m in self.members}
        owned = {j for held in self.held.values() for j in held}
        self.unowned = [j for j in range(len(self.keys)) if j not in owned]
        self.total_rate = math.fsum(self.rates)
        self.problem = build_problem(
            self.keys,
            self.rates,
            self.lags,
            state.capacity,
            self.previous,
            self.members or None,
            state.member_capacities,
            max_consumers,
        )
        self.capacity_of = self.problem.capacity_of


def _excess(view: _View, held: Mapping[str, Sequence[int]], units: _Units, unowned: Sequence[int]) -> dict[str, float]:
    """Each member's load above its share of f × capacity, in consumer units; "" holds the unowned rate."""
    excess = {"": sum(view.rates[j] for j in unowned) / units.rate} if unowned else {}
    for member, indices in held.items():
        scale = view.capacity_of(member) / units.capacity
        over = max(0.0, sum(view.rates[j] for j in indices) - units.f * units.rate * scale * ROUNDING) / units.rate
        if units.lag is not None:
            lag = sum(view.lags[j] or 0.0 for j in indices)
            over += max(0.0, lag - units.f * units.lag * scale * ROUNDING) / units.lag
        if over > 0:
            excess[member] = over
    return excess


def decide(
    state: GroupState,
    algorithm: Algorithm,
    params: Mapping[str, Any] | None,
    guards: Guards,
    max_consumers: int = MAX_CONSUMERS,
    native: bool = False,
) -> Decision:
    """The action for `state` by `algorithm` with `params` (its own, validated here), within `guards`."""
    params = dict(params or {})
    if algorithm.name == LEAST_LOADED:
        for name in ("f_up", "f_down"):
            if getattr(guards, name) is not None:
                params.setdefault(name, getattr(guards, name))
        parsed = algorithm.parse_params(params)  # least-loaded checks f_down < f_up itself
        return _least_loaded(state, algorithm, parsed, guards, max_consumers, native)
    f_up = F_UP if guards.f_up is None else guards.f_up
    f_down = F_DOWN if guards.f_down is None else guards.f_down
    if not f_down < f_up:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"f_down ({f_down:g}) must be below f_up ({f_up:g}): the band between them keeps the group from flapping.",
        )
    return _any_algorithm(state, algorithm, algorithm.parse_params(params), f_up, f_down, guards, max_consumers, native)


def _any_algorithm(
    state: GroupState,
    algorithm: Algorithm,
    params: Any,
    f_up: float,
    f_down: float,
    guards: Guards,
    max_consumers: int,
    native: bool,
) -> Decision:
    view = _View(state, max_consumers)
    members = view.members
    current = len(members)

    def size(f: float) -> tuple[Outcome, str]:
        """The algorithm's packing into consumers of f·C, sized by itself (no members), from the stored assignment."""
        capacity = state.capacity * f
        problem = build_problem(view.keys, view.rates, view.lags, capacity, view.previous, None, None, max_consumers)
        try:
            return solve(problem, algorithm, params, native), algorithm.name
        except AssignmentError as exc:
            if exc.code not in (ErrorCode.INVALID_MEMBERS, ErrorCode.INVALID_PARAMETER):
                raise
            return solve(problem, get_algorithm(FALLBACK_ALGORITHM), None, native), FALLBACK_ALGORITHM

    up, sizer = size(f_up)
    note = (
        ""
        if sizer == algorithm.name
        else f" ({algorithm.name} cannot size a group without its members, so {sizer} did)"
    )
    units = _Units(state.capacity, state.capacity, None, f_up)
    excess = _excess(view, view.held, units, view.unowned)
    total = view.total_rate
    decision = Decision(
        action="none",
        reason="",
        algorithm=sizer,
        needed=current,
        current=current,
        lower_bound=view.problem.lower_bound,
        total_rate=total,
        overloaded=sorted_consumers(m for m in excess if m),
        unowned=len(view.unowned),
    )
    packs = f"{sizer} packs {len(view.keys)} partitions (Σ rate {total:g}) into"
    if up.consumer_count > current:
        decision.action, decision.needed = "up", up.consumer_count
        decision.reason = f"{packs} {_consumers(up.consumer_count)} of f_up·C = {f_up * state.capacity:g}{note}; the group has {current}."
        return decision
    down, _ = size(f_down)
    target = max(down.consumer_count, up.consumer_count)
    if target < current:
        kept = {c for c, held in down.assignment.items() if held}
        decision.action, decision.needed = "down", target
        decision.remove = [m for m in members if m not in kept][: current - target]
        decision.reason = (
            f"{packs} {_consumers(down.consumer_count)} of f_down·C = {f_down * state.capacity:g} "
            f"({up.consumer_count} of f_up·C = {f_up * state.capacity:g}){note}; the group has {current}."
        )
        return decision
    sized = (
        f"{packs} {_consumers(up.consumer_count)} of f_up·C = {f_up * state.capacity:g}{note}, the group has {current}"
    )
    if not excess:
        decision.reason = f"{sized}, and every member is within f_up × its capacity."
        return decision

    def propose() -> Outcome:
        return solve(view.problem, algorithm, params, native)

    return _reassign(decision, view, excess, units, guards, state.assignment_age_s, algorithm.name, sized, propose)


def _least_loaded(
    state: GroupState, algorithm: Algorithm, params: Any, guards: Guards, max_consumers: int, native: bool
) -> Decision:
    view = _View(state, max_consumers)
    members = view.members
    current = len(members)
    problem = view.problem
    outcome = solve(problem, algorithm, params, native)
    outputs = outcome.outputs
    action, after = str(outputs["scale_action"]).lower(), int(outputs["consumers_after"])
    mu = params.mu or state.capacity
    units = _Units(state.capacity, mu, mu * params.w_sla, params.f_up)
    excess = _excess(view, view.held, units, view.unowned)
    total = view.total_rate
    decision = Decision(
        action="none",
        reason="",
        algorithm=algorithm.name,
        needed=current,
        current=current,
        lower_bound=problem.lower_bound,
        total_rate=total,
        overloaded=sorted_consumers(m for m in excess if m),
        unowned=len(view.unowned),
    )
    caps = f"rate ≤ μ·f = {mu * params.f_up:g} and lag ≤ μ·w_sla·f = {mu * params.w_sla * params.f_up:g}"
    if action == "up" and after > current:
        decision.action, decision.needed = "up", after
        decision.reason = (
            f"least-loaded's Procedure 1 packs {len(view.keys)} partitions (Σ rate {total:g}) into more consumers of "
            f"{caps} than the group's {current}; doScale, planning the lag of a {params.rebalance_s:g} s rebalance, "
            f"asks for {after}."
        )
        return decision
    if action == "down":
        decision.action, decision.needed = "down", after
        decision.remove = [m for m in members if not outcome.assignment.get(m)][: current - after]
        decision.reason = (
            f"least-loaded packs {len(view.keys)} partitions (Σ rate {total:g}) into fewer consumers of rate ≤ "
            f"μ·f_down = {mu * params.f_down:g} than the group's {current}; doScale, planning the rebalance's lag, "
            f"keeps {after}."
        )
        return decision
    sized = f"least-loaded keeps the group's {current} consumers ({caps})"
    if action == "none" or not excess:
        decision.reason = f"{sized}, and every member is within them."
        return decision
    return _reassign(
        decision, view, excess, units, guards, state.assignment_age_s, algorithm.name, sized, lambda: outcome
    )


def _reassign(
    decision: Decision,
    view: _View,
    excess: dict[str, float],
    units: _Units,
    guards: Guards,
    age_s: float,
    name: str,
    sized: str,
    propose: Any,
) -> Decision:
    """A violation at the group's size: `reass` if the proposal passes the guards, else `none` saying which held."""
    over = [f"{m} by {excess[m]:.3g}" for m in decision.overloaded]
    violation = "; ".join(
        ([f"above f_up × capacity: {', '.join(over)}"] if over else [])
        + (
            [f"{len(view.unowned)} partition{'' if len(view.unowned) == 1 else 's'} no member holds"]
            if view.unowned
            else []
        )
    )
    before = sum(excess.values())
    stem = f"{sized}, but the stored assignment violates ({violation}; excess {before:.3g} consumers)"
    if age_s < guards.min_interval_s:
        decision.reason = (
            f"{stem}; it is {age_s:.3g} s old, under min_interval_s {guards.min_interval_s:g}: no rebalance yet."
        )
        return decision
    proposal: Outcome = propose()
    held = {m: proposal.assignment.get(m, []) for m in view.members}
    after = sum(_excess(view, held, units, []).values())
    decision.gain = before - after
    decision.rscore, decision.moves = proposal.rscore, len(proposal.moved)
    what = (
        f"{name} on the same {len(view.members)} members brings the excess to {after:.3g} "
        f"(gain {decision.gain:.3g}), moving {decision.moves} partition{'' if decision.moves == 1 else 's'} (Rscore {decision.rscore:.3g})"
    )
    refusals = []
    if not view.unowned and not (decision.gain > 0 and decision.gain >= guards.min_gain):
        refusals.append(f"the gain is under min_gain {guards.min_gain:g}")
    if guards.max_rscore is not None and decision.rscore > guards.max_rscore * ROUNDING:
        refusals.append(f"the Rscore is above max_rscore {guards.max_rscore:g}")
    if guards.max_moves is not None and decision.moves > guards.max_moves:
        refusals.append(f"the moves are more than max_moves {guards.max_moves}")
    if refusals:
        decision.reason = f"{stem}; {what}, but {' and '.join(refusals)}: no rebalance."
        return decision
    decision.action = "reass"
    decision.reason = f"{stem}; {what}: rebalance."
    return decision


def _consumers(count: int) -> str:
    return f"{count} consumer{'' if count == 1 else 's'}"
