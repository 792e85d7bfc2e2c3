"""An assignment request as decoded, and its computation. `decode_assign` is the one place where the compiled
core's way or the reference's is chosen; either way the use case gets an `AssignInput`, completes it with what
its group has stored (`completed` → a `Computation`), and computes it on the event loop, a thread or a compute
worker into the same `Computed`: the answer's JSON and what is stored and observed of it.

- The compiled way: the compiled core reads the partitions, previous assignment and members into arrays
  (native/src/request.rs), solves them and writes the answer (sparse delta).
- The reference way: msgspec decodes the whole body, `app.core.assign.solve` solves the Problem (by the
  compiled solve adapter where it runs the algorithm, `Limits.native`), and the answer is built by `answer_of`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import msgspec
from msgspec import UNSET
from pydantic import BaseModel

from app.codec.assign import (
    AssignRequest,
    AssignResponse,
    DeltaForm,
    Move,
    answer_of,
    capacity_of,
    previous_of,
    problem_of,
)
from app.codec.groups import HISTORY_MOVES, RatesDocument
from app.codec.wire import (
    INLINE_BYTES,
    READ_INLINE_BYTES,
    PartitionRate,
    RequestPartition,
    decode,
    encode,
    keys_of,
    wired,
)
from app.core import native
from app.core.algorithm import Algorithm, algorithms, get_algorithm
from app.core.assign import Outcome, record, solve
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import MAX_CONSUMERS, PartitionKey, within

if TYPE_CHECKING:
    from groupfit_native import Bulk

    from app.settings import Settings

StoredAssignment = dict[str, list[PartitionKey]]
"""A group's stored assignment: consumer → its partitions."""
StoredRacks = dict[str, str]
"""The racks stored with a group's version: consumer → the rack it runs in."""
_STORED_ASSIGNMENT = msgspec.json.Decoder(StoredAssignment)
_STORED_RATES = msgspec.json.Decoder(RatesDocument)


def stored_assignment(raw: bytes) -> StoredAssignment:
    """A group's assignment as the store keeps it (JSON of consumer → [[topic, partition], ...])."""
    return _STORED_ASSIGNMENT.decode(raw)


def stored_rates(raw: bytes) -> RatesDocument:
    """A group's latest rates as the store keeps them (PUT /v1/groups/{group}/rates checked them)."""
    return _STORED_RATES.decode(raw)


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """What the service takes (GROUPFIT_MAX_*), which core computes, and how much is computed on the event loop."""

    max_partitions: int
    max_dense_cells: int
    max_consumers: int = MAX_CONSUMERS
    max_time_limit_ms: int | None = None
    native: bool = False
    """Whether the compiled core computes (GROUPFIT_CORE)."""
    inline_partitions: int = 0
    """A cheap algorithm's request of up to this size is computed on the event loop the reference's way."""
    inline_compiled: int = 0
    """A request of up to this size is computed on the event loop the compiled way."""

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        return cls(
            max_partitions=settings.max_partitions,
            max_dense_cells=settings.max_dense_cells,
            max_consumers=settings.max_consumers,
            max_time_limit_ms=settings.max_exact_time_limit_ms,
            native=native.choose(settings.core),
            inline_partitions=settings.compute_inline_partitions,
            inline_compiled=settings.compute_inline_compiled,
        )


class Computed(msgspec.Struct, array_like=True):
    """What the server needs of a computation: the answer's JSON (version null: the store numbers it) and
    what is stored and observed of it. Its JSON parts are views: decoded from a compute worker's result, they
    are read where they lie in it, not copied (a 1 M-partition answer is ~80 MB; a copy holds the event loop
    ~50 ms)."""

    answer: memoryview
    assignment: memoryview
    """the JSON of consumer → [[topic, partition], ...], as the store keeps it (the compiled way: empty where
    nothing is stored)"""
    loads: memoryview
    """the JSON of consumer → load (the answer's `consumers[].load`), stored beside the assignment"""
    algorithm: str
    capacity: float
    rscore: float
    consumer_count: int
    lower_bound: int
    moves_count: int
    moved_rate: float
    top_moves: list[Move]
    """the moves of the largest rate (at most HISTORY_MOVES), for the history"""
    overloaded_consumers: int
    seconds: float
    racks: memoryview
    """zone-aware: the JSON of consumer → rack, stored with the version (empty: none, the stored ones stay)"""
    cross_zone_rate: float | None = None
    """zone-aware: the rate read across zones"""


class Computation(Protocol):
    """A request completed with its group's stored state, ready to compute."""

    def inline(self, limits: Limits) -> bool:
        """Whether it is small and cheap enough for the event loop (a worker round trip would cost more)."""
        ...

    def offload(self) -> ReferenceComputation | DeferredComputation | None:
        """What a compute worker computes of it (sent as MessagePack), or None: computed on a thread of this
        process (the compiled core releases the GIL, and its arrays do not leave the process)."""
        ...

    def compute(self, limits: Limits) -> Computed: ...


class AssignInput(Protocol):
    """A decoded POST /v1/assign request, whichever way it was read."""

    @property
    def request(self) -> AssignRequest:
        """Its fields (partitions, previous assignment and members may be on the compiled core's arrays instead)."""
        ...

    @property
    def fingerprint(self) -> str:
        """What an Idempotency-Key stands for (the request as decoded, and its delta form); "" without a key."""
        ...

    @property
    def needs_rates(self) -> bool:
        """Whether it names no partitions (its group's stored rates stand for them), or names some without a rate
        (each takes its stored one)."""
        ...

    def completed(
        self,
        previous: bytes | None,
        capacity: float | None,
        rates: bytes | None,
        racks: StoredRacks | None = None,
    ) -> Computation:
        """With what its group has stored (None: nothing, or no group), as stored (JSON): the previous assignment
        where the request gives none, the capacity where it gives none, the rates document (PUT .../rates) where
        it names no partitions or leaves a partition's rate out, and the racks of the previous consumers where it
        gives none. What is larger than INLINE_BYTES is decoded where it is computed."""
        ...


_REQUEST = msgspec.json.Decoder(AssignRequest)


def decode_assign(body: bytes, limits: Limits, delta: DeltaForm = "sparse", keyed: bool = False) -> AssignInput:
    """The request, read by the compiled core where it takes it (`compiled_input`); else msgspec decodes the whole
    body, and says what is wrong with it."""
    compiled = compiled_input(body, limits, delta, keyed)
    if compiled is not None:
        return compiled
    return ReferenceInput.of(decode(_REQUEST, body), delta, keyed)


def compiled_input(
    body: bytes, limits: Limits, delta: DeltaForm = "sparse", keyed: bool = False
) -> CompiledInput | None:
    """The request read by the compiled core (the GIL released), where it computes (`limits.native`), writes the
    answer (a sparse delta or none, not a dense one) and no Idempotency-Key (`keyed`) needs the decoded request's
    fingerprint, and where it takes the body and runs the algorithm; else None."""
    if not limits.native or delta == "dense" or keyed:
        return None
    split = native.parse_assign(body)
    if split is None:
        return None
    rest, bulk = split
    try:  # the compiled reader found no key twice in any object
        request = _REQUEST.decode(rest)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None  # the whole body's decoding says what is wrong, as it would have said it
    algorithm = algorithms().get(request.algorithm)
    if algorithm is None or not algorithm.compiled or request.assignment is not None:
        return None
    return CompiledInput(request, bulk, body, delta == "sparse")


class EncodedInput(msgspec.Struct, frozen=True):
    """A large body decoded by a compute worker (`encoded_input`): on the server only what it needs of the
    request (its group, algorithm, dry_run and expected_version: `request` has no partitions, previous
    assignment, members, parameters or given assignment), the rest as MessagePack, decoded where it is computed.
    The server moves its bytes and never holds its partitions."""

    request: AssignRequest
    fingerprint: str
    needs_rates: bool
    encoded: memoryview
    """The ReferenceInput, as MessagePack (decoded on the server as a view: not copied)."""

    def completed(
        self,
        previous: bytes | None,
        capacity: float | None,
        rates: bytes | None,
        racks: StoredRacks | None = None,
    ) -> Computation:
        return DeferredComputation(self.encoded, previous, capacity, rates, racks=racks)


def encoded_input(body: bytes, delta: DeltaForm, keyed: bool) -> EncodedInput:
    """The worker's side of EncodedInput: the body decoded (and checked) the reference's way."""
    reference = ReferenceInput.of(decode(_REQUEST, body), delta, keyed)
    request = reference.request
    head = AssignRequest(
        algorithm=request.algorithm,
        group=request.group,
        expected_version=request.expected_version,
        dry_run=request.dry_run,
    )
    return EncodedInput(
        head, reference.fingerprint, reference.needs_rates, memoryview(msgspec.msgpack.encode(reference))
    )


def answer(body: bytes, limits: Limits, delta: DeltaForm = "sparse") -> bytes:
    """What `groupfit assign` prints: the answer to a request that describes everything (nothing is stored)."""
    decoded = decode_assign(body, limits, delta)
    if decoded.needs_rates:
        raise AssignmentError(
            ErrorCode.INVALID_REQUEST,
            "give 'partitions' with their rates: a list of {topic, partition, rate, lag} (no group's rates are "
            "stored here to take them from).",
        )
    return bytes(decoded.completed(None, None, None).compute(limits).answer)


@dataclass(frozen=True)
class CompiledInput:
    """Read by the compiled core: the partitions, previous assignment and members on its arrays (`bulk`)."""

    request: AssignRequest
    bulk: Bulk
    body: bytes
    """As sent: read again the reference's way if the group's stored consumer ids are ones the compiled core
    cannot rank."""
    delta: bool
    """Whether the answer carries the (sparse) delta."""
    fingerprint = ""  # a request with an Idempotency-Key is read the reference's way

    @property
    def needs_rates(self) -> bool:
        return self.bulk.needs_rates

    def completed(
        self,
        previous: bytes | None,
        capacity: float | None,
        rates: bytes | None,
        racks: StoredRacks | None = None,
    ) -> Computation:
        bulk = self.bulk
        own_capacity = capacity_of(self.request, capacity)  # checked first, as the reference checks it
        if (
            (bulk.needs_rates and not self._rates(rates))
            or (previous is not None and not bulk.has_previous and not bulk.set_previous(stored_assignment(previous)))
            or not self._racks(racks)
        ):
            if len(self.body) > INLINE_BYTES:  # read again where it is computed
                return DeferredComputation(memoryview(b""), previous, capacity, rates, self.body, self.delta, racks)
            return _read_again(self.body, self.delta).completed(previous, capacity, rates, racks)
        return CompiledComputation(self.request, bulk, own_capacity, self.delta)

    def _rates(self, stored: bytes | None) -> bool:
        """The group's stored rates onto the partitions given without one, as `rated` takes them; False where the
        reference must read them: rates this reader does not take, or more than it reads on the event loop (the
        reference reads them where it computes, off it)."""
        rates = _stored_rates_of(self.request, stored)
        filled = self.bulk.fill_rates(rates) if len(rates) <= READ_INLINE_BYTES else None
        if filled is None:
            return False
        _check_taken(self.request.group, self.bulk.size, *filled)
        return True

    def _racks(self, stored: StoredRacks | None) -> bool:
        """Without members, the previous consumers' racks onto the arrays: the request's `previous_racks`, else
        those stored with the group (of the previous assignment's consumers); False where the reference must say
        what is wrong (previous_racks with members, or for a consumer that did not run)."""
        given = self.request.previous_racks
        if self.bulk.member_count is not None:
            return not given
        if given:
            return self.bulk.set_racks(given, True)
        return not stored or self.bulk.set_racks(stored, False)


def _read_again(body: bytes, delta: bool) -> ReferenceInput:
    """A body the compiled reader took (no key is twice in it: it checked), read the reference's way."""
    return ReferenceInput.of(decode(_REQUEST, body, unique_keys=False), "sparse" if delta else "none", False)


@dataclass(frozen=True)
class CompiledComputation:
    request: AssignRequest
    bulk: Bulk
    capacity: float
    delta: bool

    def inline(self, limits: Limits) -> bool:
        return self.bulk.work <= limits.inline_compiled  # well under a millisecond

    def offload(self) -> None:
        return None

    def compute(self, limits: Limits) -> Computed:
        """The checks the reference makes, in the same order, and the answer (sparse delta) written by the
        compiled core; for a version to store, also the assignment as the store keeps it and the moves of the
        history."""
        request = self.request
        stored = bool(request.group) and not request.dry_run
        algorithm, params = algorithm_of(request, self.bulk.size, limits)
        started = time.perf_counter()
        solution, lower_bound = native.solve_bulk(
            self.bulk, algorithm.name, self.capacity, params, limits.max_consumers
        )
        seconds = time.perf_counter() - started
        used, moves, moved_rate, top, overloaded, rscore = solution.summary(HISTORY_MOVES if stored else 0)
        racks, cross_zone_rate = solution.racks() or (b"", None)
        assignment, loads = solution.stored() if stored else (b"", b"")
        return Computed(
            memoryview(
                solution.answer(
                    algorithm.name, lower_bound, encode(wired(solution.outputs())), encode(request.group), self.delta
                )
            ),
            memoryview(assignment),
            memoryview(loads),
            algorithm.name,
            float(self.capacity),
            rscore,
            used,
            lower_bound,
            moves,
            moved_rate,
            [Move(*move) for move in top],
            overloaded,
            seconds,
            memoryview(racks),
            cross_zone_rate,
        )


class ReferenceInput(msgspec.Struct, frozen=True):
    """Decoded by msgspec: every field in `request`."""

    request: AssignRequest
    delta: DeltaForm
    fingerprint: str

    @classmethod
    def of(cls, request: AssignRequest, delta: DeltaForm, keyed: bool) -> ReferenceInput:
        fingerprint = ""  # only computed when the answer is stored with its key
        if keyed and request.group:
            fingerprint = hashlib.sha256(encode(request) + delta.encode()).hexdigest()
        return cls(request, delta, fingerprint)

    @property
    def needs_rates(self) -> bool:
        partitions = self.request.partitions
        return partitions is None or any(p.rate is UNSET for p in partitions)

    def completed(
        self,
        previous: bytes | None,
        capacity: float | None,
        rates: bytes | None,
        racks: StoredRacks | None = None,
    ) -> Computation:
        request = self.request
        capacity = capacity_of(request, capacity)
        rates = _stored_rates_of(request, rates) if self.needs_rates else None
        stored: list[PartitionRate] | None = None
        if rates is not None and len(rates) <= INLINE_BYTES:
            stored, rates = stored_rates(rates).partitions, None
        given = previous_of(request)
        if given is not None:
            previous = None
        elif previous is not None and len(previous) <= INLINE_BYTES:
            given, previous = stored_assignment(previous), None
        # the partitions and previous assignment travel once, beside the request
        lean = msgspec.structs.replace(request, partitions=None, previous=None)
        return ReferenceComputation(
            lean,
            request.partitions,
            stored,
            given or {},
            capacity,
            self.delta,
            previous or b"",
            rates or b"",
            racks or {},
        )


def _stored_rates_of(request: AssignRequest, rates: bytes | None) -> bytes:
    """The group's stored rates, for a request that names no partitions or leaves a rate out."""
    group = request.group
    if not group:
        raise AssignmentError(
            ErrorCode.INVALID_REQUEST,
            "give 'partitions' with their rates, or a 'group' whose rates were stored with "
            "PUT /v1/groups/{group}/rates.",
        )
    if rates is None:
        raise AssignmentError(
            ErrorCode.NO_RATES,
            f"group {group!r} has no stored rates; send 'partitions' with their rates or PUT "
            f"/v1/groups/{group}/rates first.",
        )
    return rates


def rated(
    group: str | None, partitions: Sequence[RequestPartition] | None, stored: Sequence[PartitionRate] | None
) -> list[PartitionRate]:
    """Each partition with its rate: the request's (none: the group's `stored` ones stand for them), a rate left out
    taken from `stored` with its lag unless one is given, 0 for one not stored (see `_check_taken`)."""
    if partitions is None:
        return list(stored or ())
    by_key = {} if stored is None else {(p.topic, p.partition): p for p in stored}
    result, taken, missing = [], 0, 0
    for p in partitions:
        rate, lag = p.rate, p.lag
        if rate is UNSET:
            missing += 1
            found = by_key.get((p.topic, p.partition))
            rate = 0.0 if found is None else found.rate
            if found is not None:
                taken += 1
                lag = found.lag if lag is None else lag
        result.append(PartitionRate(p.topic, p.partition, rate, lag, p.racks))
    _check_taken(group, len(partitions), missing, taken)
    return result


def _check_taken(group: str | None, size: int, missing: int, taken: int) -> None:
    """NO_RATES where every rate was left out and none is stored: a group of zero rates would go to one consumer,
    which no one asking means."""
    if taken == 0 and missing == size > 0:
        raise AssignmentError(
            ErrorCode.NO_RATES,
            f"group {group!r} has no stored rate for any partition given without one; give their rates or PUT "
            f"/v1/groups/{group}/rates first.",
        )


class DeferredComputation(msgspec.Struct, array_like=True, tag=True):
    """A large request completed with its group's stored state, as stored, all of it decoded in the worker: an
    EncodedInput (`encoded`), or a body the compiled reader took but whose group's stored consumer ids it cannot
    rank (`body`, read again the reference's way)."""

    encoded: memoryview
    previous: bytes | None
    capacity: float | None
    rates: bytes | None
    body: bytes = b""
    delta: bool = True
    """(with `body`) whether the answer carries the sparse delta"""
    racks: StoredRacks | None = None

    def inline(self, limits: Limits) -> bool:
        return False

    def offload(self) -> DeferredComputation:
        return self

    def compute(self, limits: Limits) -> Computed:
        reference = _REFERENCE_INPUT.decode(self.encoded) if self.encoded else _read_again(self.body, self.delta)
        return reference.completed(self.previous, self.capacity, self.rates, self.racks).compute(limits)


class ReferenceComputation(msgspec.Struct, array_like=True, tag=True):
    """Everything the reference's computation needs: what a compute worker is sent, as MessagePack."""

    request: AssignRequest
    partitions: list[RequestPartition] | None
    """As the request gives them (None: the group's stored rates stand for them)."""
    stored: list[PartitionRate] | None
    """The group's stored rates where the request needs them and they are at most INLINE_BYTES (decoded)."""
    previous: dict[str, list[tuple[str, int]]]
    capacity: float
    delta: DeltaForm = "sparse"
    stored_previous: bytes = b""
    """The group's stored assignment, as stored, where it is larger than INLINE_BYTES: decoded by compute()."""
    stored_rates: bytes = b""
    """The group's stored rates, as stored, where they are larger than INLINE_BYTES: decoded by compute()."""
    stored_racks: StoredRacks = msgspec.field(default_factory=dict)
    """The racks stored with the group's version (the request's previous_racks, if any, come first)."""

    def inline(self, limits: Limits) -> bool:
        if self.stored_previous or self.stored_rates:
            return False
        size = (
            len(self.partitions or self.stored or ())
            + len(self.request.members or ())
            + sum(map(len, self.previous.values()))
        )
        cheap = self.request.assignment is not None or get_algorithm(self.request.algorithm).cheap  # given: O(n)
        return cheap and size <= limits.inline_partitions

    def offload(self) -> ReferenceComputation:
        return self

    def compute(self, limits: Limits) -> Computed:
        stored = stored_rates(self.stored_rates).partitions if self.stored_rates else self.stored
        partitions = rated(self.request.group, self.partitions, stored)
        previous = stored_assignment(self.stored_previous) if self.stored_previous else self.previous
        outcome, answer, seconds = reference_answer(
            self.request, partitions, previous, self.capacity, self.delta, limits, self.stored_racks
        )
        answer.group = self.request.group
        keys = outcome.problem.keys
        zones = outcome.zones
        return Computed(
            memoryview(encode(answer)),
            memoryview(encode({c: [keys[j] for j in held] for c, held in outcome.assignment.items()})),
            memoryview(encode({c: outcome.loads[c] for c in outcome.assignment})),
            outcome.algorithm,
            outcome.problem.capacity,
            outcome.rscore,
            outcome.consumer_count,
            outcome.problem.lower_bound,
            len(outcome.moved),
            sum(move.rate for move in answer.moves),
            sorted(answer.moves, key=lambda move: -move.rate)[:HISTORY_MOVES],
            sum(1 for c, load in outcome.loads.items() if not within(load, outcome.problem.capacity_of(c))),
            seconds,
            memoryview(
                b"" if zones is None else encode({c: rack for c, rack in zones.racks.items() if rack is not None})
            ),
            None if zones is None else zones.cross_zone_rate,
        )


def reference_answer(
    request: AssignRequest,
    partitions: Sequence[PartitionRate],
    previous: Mapping[str, Sequence[PartitionKey]],
    capacity: float,
    delta: DeltaForm,
    limits: Limits,
    stored_racks: StoredRacks | None = None,
) -> tuple[Outcome, AssignResponse, float]:
    """The reference's way: validate, solve (or take the assignment given), build the answer (and the seconds the
    algorithm took)."""
    algorithm, params = algorithm_of(request, len(partitions), limits)
    problem = problem_of(request, partitions, previous, capacity, limits.max_consumers, stored_racks)
    started = time.perf_counter()
    if request.assignment is not None:
        outcome = record(problem, algorithm.name, {c: keys_of(held) for c, held in request.assignment.items()})
    else:
        outcome = solve(problem, algorithm, params, limits.native)
    seconds = time.perf_counter() - started
    if delta == "dense" and outcome.dense_delta_size() > limits.max_dense_cells:
        raise AssignmentError(
            ErrorCode.DELTA_TOO_LARGE,
            f"the dense delta would have {outcome.dense_delta_size()} cells (limit {limits.max_dense_cells}); "
            "use the sparse delta (the default).",
        )
    return outcome, answer_of(outcome, delta), seconds


def algorithm_of(request: AssignRequest, partitions: int, limits: Limits) -> tuple[Algorithm, BaseModel | None]:
    """The request's algorithm and parameters, within the service's limits."""
    if partitions > limits.max_partitions:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{partitions} partitions is more than this service takes ({limits.max_partitions}); split the group.",
        )
    algorithm = get_algorithm(request.algorithm)
    params = algorithm.parse_params(request.params)
    budget = getattr(params, "time_limit_ms", None)
    if budget is not None and limits.max_time_limit_ms is not None and budget > limits.max_time_limit_ms:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER,
            f"time_limit_ms {budget} is above this service's limit ({limits.max_time_limit_ms}); ask for less.",
            {"max_time_limit_ms": limits.max_time_limit_ms},
        )
    return algorithm, params


_REFERENCE_INPUT = msgspec.msgpack.Decoder(ReferenceInput)


class AssignJob(msgspec.Struct, array_like=True):
    """A computation sent to a compute worker."""

    computation: ReferenceComputation | DeferredComputation
    limits: Limits

    def run(self) -> Computed:
        return self.computation.compute(self.limits)
