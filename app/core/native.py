"""The compiled core's solve adapter: the `groupfit_native` extension (app/core/extension.py) runs the hot
path — the bins and fit rules, Any Fit, Modified Any Fit with its migration budget, least-loaded, and the
owners, moves, Rscore and sparse delta — on arrays, with the partition index standing for (topic, partition)
and consumers as integers. The pure-Python modules of app/core stay the reference: the differential tests
require the same outcome from both. It sits above the model and the algorithms (it makes their checks);
app/core/assign.py uses it.

`GROUPFIT_CORE` (app/settings.py) chooses: `auto` (compiled when installed), `native` (required),
`python` (the reference only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from app.core.algorithm import get_algorithm
from app.core.algorithms.least_loaded import LeastLoadedParams, check, check_scales, check_totals
from app.core.extension import ALGORITHMS, AVAILABLE, module
from app.core.model import Problem, check_capacity, check_scale

if TYPE_CHECKING:
    from groupfit_native import Bulk, Replayed, Stream

CHOICES = ("auto", "native", "python")


def choose(setting: str) -> bool:
    """Whether the compiled core runs, for GROUPFIT_CORE = `setting`."""
    if setting not in CHOICES:
        raise ValueError(f"GROUPFIT_CORE must be one of {', '.join(CHOICES)}, got {setting!r}.")
    if setting == "native" and not AVAILABLE:
        raise ValueError(
            "GROUPFIT_CORE=native but the compiled core (groupfit_native) is not installed; "
            "build it with `pip install ./native` (needs cargo), or set GROUPFIT_CORE=auto."
        )
    return AVAILABLE and setting != "python"


def describe(native: bool, setting: str) -> str:
    """The one line that says which core runs."""
    if native:
        return f"core: compiled (groupfit_native, Rust) for {', '.join(sorted(ALGORITHMS))}; GROUPFIT_CORE={setting}"
    why = "not installed" if not AVAILABLE else "not chosen"
    return f"core: pure Python (the compiled core is {why}); GROUPFIT_CORE={setting}"


def solve(problem: Problem, name: str, params: BaseModel | None) -> tuple[Any, ...] | None:
    """The compiled outcome's parts (see app.core.assign.solve), or None where the compiled core does not run
    this algorithm or it cannot order these consumer ids exactly as the reference does (non-ASCII ids); the
    reference then runs. A zone-aware problem (`Problem.zones`) goes with its racks."""
    bulk = bulk_of(problem, name, params)
    if bulk is None:
        return None
    return tuple(bulk.solve(name, problem.capacity, complete(name, params)).parts())


def bulk_of(problem: Problem, name: str, params: BaseModel | None) -> Bulk | None:
    """The problem on the compiled core's arrays, ready for `Bulk.solve(name, capacity, complete(name, params))`;
    None where the reference must run it (see `solve`)."""
    if module is None or name not in ALGORITHMS:
        return None
    if isinstance(params, LeastLoadedParams):  # what its parameters imply, refused as the reference refuses it
        check(problem, params)
    zoned = problem.zones is not None
    try:
        return module.from_objects(
            problem.keys,
            problem.rates,
            problem.lags if name == "least-loaded" else None,
            problem.previous,
            problem.members,
            problem.member_capacities,
            problem.racks if zoned else None,
            problem.consumer_racks if zoned else None,
        )
    except (TypeError, OverflowError):  # values the arrays cannot hold (a partition number beyond 64 bits, …)
        return None


def complete(name: str, params: BaseModel | None) -> dict[str, Any]:
    """Every parameter the algorithm reads, as its model holds them (its defaults where none were given): the
    compiled core holds no defaults, and refuses a parameter missing as a bug."""
    if params is None:
        params = get_algorithm(name).parse_params(None)
    return params.model_dump()


def parse_assign(body: bytes) -> tuple[bytes, Bulk] | None:
    """An assignment request's JSON → (the JSON of its fields other than partitions, previous and members,
    for the codec to decode; those three on arrays), or None where the reference decoder must read it: the
    compiled reader takes only what the reference would accept, meaning the same (native/src/request.rs)."""
    if module is None:
        return None
    return module.parse_assign(body)


def solve_bulk(bulk: Bulk, name: str, capacity: float, params: BaseModel | None, max_consumers: int) -> tuple[Any, int]:
    """(the compiled Solution, the lower bound ⌈Σ rate / C⌉) of a request read by `parse_assign`, after the
    checks `build_problem` and the algorithm make (here on the totals, summed as the reference sums them), in
    the same order, with the same errors."""
    check_capacity(capacity)
    planning = params if isinstance(params, LeastLoadedParams) else None
    totals = bulk.totals(planning.rebalance_s if planning else 0.0, planning.plan_rebalance_lag if planning else False)
    lower_bound = _check_totals(totals, capacity, planning, bulk.member_count, bulk.member_capacities, max_consumers)
    solution = bulk.solve(name, float(capacity), complete(name, params))
    return solution, lower_bound


def _check_totals(
    totals: tuple[float, float, float],
    capacity: float,
    planning: LeastLoadedParams | None,
    member_count: int | None,
    member_capacities: dict[str, float],
    max_consumers: int,
) -> int:
    """The checks of `build_problem` and the algorithm on one request's totals (Σ rate, Σ lag, Σ planned lag);
    ⌈Σ rate / C⌉."""
    total_rate, lag_sum, planned_sum = totals
    lower_bound = check_scale(total_rate, capacity, member_count, max_consumers)
    if planning is not None:
        check_totals(capacity, total_rate, lag_sum, planned_sum, planning, max_consumers)
        check_scales(capacity, member_capacities)
    return lower_bound


def stream(measurements: list[Any]) -> Stream | None:
    """A stream of measurements (topic → {partition: rate}) on the compiled core's arrays, or None where the
    reference must replay it (the compiled core is not installed, or the reference would refuse the stream and
    says why)."""
    return None if module is None else module.Stream.of_measurements(measurements)


def replay(
    measurements: Stream, name: str, capacity: float, params: BaseModel | None, max_consumers: int, owners: bool
) -> Replayed | None:
    """The stream replayed through `name` by the compiled core, each measurement from the algorithm's own previous
    assignment (`app.sim.replay`), after the checks the reference makes at each measurement, in order (the first
    failing one raises the reference's error); None where the compiled core does not run `name`."""
    if module is None or name not in ALGORITHMS:
        return None
    check_capacity(capacity)
    planning = params if isinstance(params, LeastLoadedParams) else None
    for totals in measurements.totals(
        planning.rebalance_s if planning else 0.0, planning.plan_rebalance_lag if planning else False
    ):
        _check_totals(totals, capacity, planning, None, {}, max_consumers)
    return measurements.replay(name, float(capacity), complete(name, params), owners)
