"""POST /v1/assign and `groupfit assign`: the request, its problem, and the answer built from an Outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from app.codec.wire import (
    ConsumerId,
    GroupName,
    PartitionRate,
    PartitionRef,
    Rack,
    RequestPartition,
    keys_of,
    partition_ref,
    partition_refs,
    wired,
)
from app.core.assign import Outcome
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import (
    MAX_CONSUMERS,
    PartitionKey,
    Problem,
    build_problem,
    capacity_from_throughput,
    sorted_consumers,
)


class SizedMember(Struct, forbid_unknown_fields=True):
    """A member given as an object: its own capacity (a consumer of another size) and its rack, each optional; a
    bare id has the request's capacity and no rack."""

    id: ConsumerId
    capacity: (
        Annotated[float, Meta(description="most rate this member may be given, in the rates' unit")] | UnsetType
    ) = UNSET
    rack: Annotated[Rack, Meta(description="the rack (zone) it runs in: its client.rack")] | UnsetType = UNSET


class AssignRequest(Struct, forbid_unknown_fields=True, kw_only=True):
    algorithm: Annotated[
        str, Meta(description="a name from GET /v1/algorithms", examples=["mwf", "bfd", "least-loaded"])
    ]
    partitions: Annotated[
        list[RequestPartition] | None,
        Meta(
            description="the group's partitions; a partition without 'rate' takes the group's stored one (PUT "
            "/v1/groups/{group}/rates); none at all: the stored rates' partitions"
        ),
    ] = None
    capacity: Annotated[float | None, Meta(description="most rate one consumer may be given (C)")] = None
    consumer_throughput: Annotated[
        float | None, Meta(description="real consumer throughput C̄; C = C̄·(iteration_s − rebalance_s)/iteration_s")
    ] = None
    iteration_s: float = 30.0
    rebalance_s: float = 5.0
    previous: dict[ConsumerId, list[PartitionRef]] | None = None
    members: Annotated[
        list[ConsumerId | SizedMember] | None,
        Meta(
            description="the group's consumers: ids, or {id, capacity, rack} for a member of its own capacity or rack"
        ),
    ] = None
    previous_racks: Annotated[
        dict[ConsumerId, Rack] | UnsetType,
        Meta(
            description="without members: the rack each consumer of the previous assignment runs in (default: the "
            "racks stored with the group's version)"
        ),
    ] = UNSET
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    assignment: Annotated[
        dict[ConsumerId, list[PartitionRef]] | None,
        Meta(
            description="an assignment computed elsewhere (a broker-side assignor, a leader's local fallback) to "
            "record: nothing is computed; it must place every partition once (on members, when members are "
            "given), and the answer gives its moves, delta, Rscore and loads, stored as a version as usual; "
            "'algorithm' names what computed it"
        ),
    ] = None
    group: GroupName | None = None
    expected_version: Annotated[int, Meta(ge=0)] | None = None
    dry_run: bool = False


class ConsumerLoad(Struct, gc=False):
    id: str
    load: float
    utilization: float
    partition_count: int
    rack: Annotated[
        str | UnsetType | None,
        Meta(description="zone-aware answers: the rack it runs in, or should be started in (null: not known)"),
    ] = UNSET
    cross_zone_rate: Annotated[
        float | UnsetType, Meta(description="zone-aware answers: the rate it reads across zones")
    ] = UNSET


class Move(Struct, gc=False):
    topic: str
    partition: int
    from_: str = msgspec.field(name="from")
    to: str
    rate: float


class Delta(Struct):
    rows: list[str]
    columns: list[PartitionRef]
    cells: list[
        Annotated[
            list[int],
            Meta(
                min_length=3,
                max_length=3,
                description="[row, column, value]: indices into rows and columns; value -1 stop, +1 start",
            ),
        ]
    ]
    matrix: list[list[int]] | UnsetType = UNSET


class OverloadedPartition(Struct, gc=False):
    topic: str
    partition: int
    rate: float
    consumer: str


DeltaForm = Literal["sparse", "dense", "none"]
"""How an answer gives the delta (`?delta=`): its non-zero rows and columns, the whole matrix, or not at all (the
moves tell the same rebalance; a leader that needs only the assignment reads less)."""


class AssignResponse(Struct, kw_only=True):
    algorithm: str
    capacity: float
    assignment: dict[str, list[PartitionRef]]
    consumers: list[ConsumerLoad]
    moves: list[Move]
    delta: Annotated[Delta, Meta(description="left out when asked for with ?delta=none")] | UnsetType = UNSET
    rscore: float
    consumer_count: int
    lower_bound: Annotated[
        int, Meta(description="⌈Σ rate / C⌉; may exceed consumer_count when a partition above C is alone")
    ]
    overloaded_partitions: list[OverloadedPartition]
    overloaded_members: list[str]
    recommended_consumers: int | None
    outputs: dict[str, Any]
    cross_zone_rate: Annotated[
        float | UnsetType,
        Meta(description="zone-aware answers (partitions with racks): the rate read across zones, all consumers"),
    ] = UNSET
    group: str | None = None
    version: int | None = None


def capacity_of(request: AssignRequest, stored: float | None = None) -> float:
    """`capacity`, or the throughput form (§VI-C), or the group's stored capacity."""
    if request.capacity is not None:
        return request.capacity
    if request.consumer_throughput is not None:
        return capacity_from_throughput(request.consumer_throughput, request.iteration_s, request.rebalance_s)
    if stored is not None:
        return stored  # a group keeps its capacity until told otherwise
    raise AssignmentError(
        ErrorCode.INVALID_CAPACITY,
        "give 'capacity' (rate per consumer) or 'consumer_throughput' (with iteration_s, rebalance_s).",
    )


def problem_of(
    request: AssignRequest,
    partitions: Sequence[PartitionRate],
    previous: Mapping[str, Sequence[PartitionKey]],
    capacity: float,
    max_consumers: int = MAX_CONSUMERS,
    previous_racks: Mapping[str, str] | None = None,
) -> Problem:
    """The request's problem. `previous_racks`: without members, the racks of the previous consumers (the request's,
    else those stored with the group; only the previous assignment's consumers are kept of the stored ones)."""
    members = request.members
    if members is not None:
        if request.previous_racks:
            raise AssignmentError(
                ErrorCode.INVALID_RACKS,
                "previous_racks is for a group sized by groupfit; with members, give each member's rack: "
                '{"id": ..., "rack": ...}.',
            )
        consumer_racks = {m.id: m.rack for m in members if isinstance(m, SizedMember) and m.rack}
    elif request.previous_racks:
        consumer_racks = dict(request.previous_racks)
    else:
        consumer_racks = {c: rack for c, rack in (previous_racks or {}).items() if c in previous}
    return build_problem(
        keys_of(partitions),
        [p.rate for p in partitions],
        [p.lag for p in partitions],
        capacity,
        previous,
        None if members is None else [_member_id(m) for m in members],
        {m.id: m.capacity for m in members or () if isinstance(m, SizedMember) and m.capacity is not UNSET},
        max_consumers=max_consumers,
        racks=[p.racks or None for p in partitions] if any(p.racks for p in partitions) else None,
        consumer_racks=consumer_racks,
    )


def _member_id(member: str | SizedMember) -> str:
    return member if isinstance(member, str) else member.id


def previous_of(request: AssignRequest) -> dict[str, list[PartitionKey]] | None:
    return None if request.previous is None else {c: keys_of(held) for c, held in request.previous.items()}


def answer_of(outcome: Outcome, delta: DeltaForm = "sparse") -> AssignResponse:
    """The answer. The delta is sparse (only rows and columns with a non-zero cell); dense labels every row and
    column and adds `matrix`; none leaves it out."""
    problem = outcome.problem
    keys, rates, capacity = problem.keys, problem.rates, problem.capacity
    owner, loads, assignment = outcome.owner, outcome.loads, outcome.assignment
    consumers = [ConsumerLoad(c, loads[c], outcome.utilization(c), len(assignment[c])) for c in outcome.consumers]
    zones = outcome.zones
    if zones is not None:
        for consumer in consumers:
            consumer.rack, consumer.cross_zone_rate = zones.racks[consumer.id], zones.cross_zone[consumer.id]
    return AssignResponse(
        algorithm=outcome.algorithm,
        capacity=capacity,
        assignment=assignment_of(partition_refs(keys), assignment, outcome.consumers),
        consumers=consumers,
        moves=[
            Move(keys[j][0], keys[j][1], was, owner[j], rates[j]) for j, was in zip(outcome.moved, outcome.moved_from)
        ],
        delta=UNSET if delta == "none" else delta_of(outcome, delta == "dense"),
        rscore=outcome.rscore,
        consumer_count=outcome.consumer_count,
        lower_bound=problem.lower_bound,
        overloaded_partitions=[
            OverloadedPartition(keys[j][0], keys[j][1], rates[j], owner[j]) for j in outcome.overloaded
        ],
        overloaded_members=outcome.overloaded_members(),
        recommended_consumers=outcome.recommended_consumers,
        outputs=wired(outcome.outputs),
        cross_zone_rate=UNSET if zones is None else zones.cross_zone_rate,
    )


def delta_of(outcome: Outcome, dense: bool) -> Delta:
    d = outcome.delta(full=dense)
    return Delta(
        rows=d.rows,
        columns=partition_refs(d.columns),
        cells=d.cells,  # type: ignore[arg-type]  # (row, column, ±1) tuples encode as arrays
        matrix=d.dense() if dense else UNSET,
    )


_NO_VERSION = b'"version":null}'


def with_version(answer: bytes | memoryview, version: int) -> list[bytes | memoryview]:
    """An encoded answer, encoded before the store numbered it, with its version, as the parts of its JSON:
    `version` is the last field, so this is a splice of the tail, neither a second encoding nor a copy of what
    may be megabytes."""
    if answer[-len(_NO_VERSION) :] != _NO_VERSION:
        raise ValueError("the answer was encoded with a version already")
    return [memoryview(answer)[: -len(_NO_VERSION)], b'"version":%d}' % version]


def assignment_of(
    refs: list[PartitionRef], assignment: Mapping[str, Sequence[int]], consumers: Sequence[str]
) -> dict[str, list[PartitionRef]]:
    """consumer → its partitions in the wire form (`refs[j]`: partition j's), consumers in the order given."""
    return {c: list(map(refs.__getitem__, assignment[c])) for c in consumers}


def assignment_refs(assignment: Mapping[str, Sequence[PartitionKey]]) -> dict[str, list[PartitionRef]]:
    """A stored assignment in the wire form, consumers in id order."""
    return {c: [partition_ref(key) for key in assignment[c]] for c in sorted_consumers(assignment)}
