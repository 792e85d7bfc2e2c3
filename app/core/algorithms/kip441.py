"""KIP-441 lag-ranked assignment for stateful consumers (Kafka Streams "smooth scaling out").

Each member reports its lag on the state of each partition it hosts. Ranks floor at
acceptable_recovery_lag (rank 0 = caught up; a member that hosts nothing of a task ranks last). Actives
go only to the most caught-up members, as balanced as that allows (constrainedBalancedAssignment);
a balanced proposal that ignores ranks (proposeBalancedAssignment) gives the movements, each started as
a warm-up replica on its destination (at most max_warmup_replicas) with a probing rebalance to finish
it; num_standbys standbys go to the next most caught-up; stateless partitions to the least loaded.
An assignment that is already valid and balanced comes back unchanged (convergence).
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from app.core.algorithm import Algorithm, Packing, register
from app.core.algorithms.params import PartitionRef
from app.core.errors import AssignmentError, ErrorCode
from app.core.model import PartitionKey, Problem, consumer_sort_key, sorted_consumers


class StateLag(PartitionRef):
    lag: float = Field(ge=0, description="offsets the member's copy of this partition's state is behind")


class Kip441Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    member_lags: dict[str, list[StateLag]] = Field(
        default_factory=dict,
        description="per member, its lag on the state of each partition it hosts (absent: not hosted)",
    )
    stateless: list[PartitionRef] = Field(default_factory=list, description="partitions without state")
    acceptable_recovery_lag: float = Field(10_000, ge=0)
    balance_factor: int = Field(1, ge=1)
    num_standbys: int = Field(0, ge=0)
    max_warmup_replicas: int = Field(2, ge=1)
    probing_rebalance_interval_ms: int = Field(600_000, ge=60_000)


def pack(problem: Problem, params: Kip441Params) -> Packing:
    if problem.members is None:
        raise AssignmentError(ErrorCode.INVALID_MEMBERS, "kip441 assigns among the group's members: give 'members'.")
    members = sorted_consumers(problem.members)
    stateless = {_index_of(problem, ref, "stateless") for ref in params.stateless}
    if len(stateless) < len(params.stateless):
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER, "stateless lists a partition twice; list each partition once."
        )
    tasks = [j for j in problem.key_order if j not in stateless]
    rank = _ranks(problem, params, members)
    # Most caught-up members of each task (all members if nobody hosts it): one pass over the members that
    # host it, so the work is O(P + hosted) rather than O(P·M²).
    caught_up = {j: _most_caught_up(rank[j], members) for j in tasks}
    member_set = set(members)
    previous = {j: owner for j, owner in enumerate(problem.previous_owner) if owner in member_set}
    ceiling = math.ceil(len(tasks) / len(members)) + params.balance_factor - 1
    heading: dict[int, str] = {}  # task → the member it moves to, catching up as a standby there

    if _converged(tasks, caught_up, previous, members, params.balance_factor):
        actives = {m: [j for j in tasks if previous[j] == m] for m in members}
        warmups: dict[str, list[int]] = {m: [] for m in members}
    else:
        # constrainedBalancedAssignment: the most constrained tasks first.
        order = sorted(tasks, key=lambda j: len(caught_up[j]))
        actives = _balanced(order, caught_up, previous, members, ceiling, params.balance_factor, problem)
        owner = {j: m for m, held in actives.items() for j in held}
        # proposeBalancedAssignment: any member, sticky to the constrained one, balanced within the factor.
        anyone = {j: members for j in tasks}
        proposal = _balanced(tasks, anyone, owner, members, ceiling, params.balance_factor, problem)
        moves = [(j, m) for m, held in proposal.items() for j in held if owner[j] != m]
        moves.sort(key=lambda move: problem.keys[move[0]])
        # Each movement starts as a warm-up on its destination, unless the destination already hosts the
        # task's state and will keep it as a standby: the KIP reserves warm-ups for instances with neither.
        warmups = {m: [] for m in members}
        for j, destination in moves:
            if params.num_standbys > 0 and destination in rank[j]:
                heading[j] = destination
            elif sum(map(len, warmups.values())) < params.max_warmup_replicas:
                warmups[destination].append(j)
    actives = {m: sorted(held, key=problem.keys.__getitem__) for m, held in actives.items()}
    owner = {j: m for m, held in actives.items() for j in held}
    warming = {j: m for m, held in warmups.items() for j in held}
    # Standbys: the member a task moves to first, then the next most caught-up members (KIP-441 property
    # 2), among equals the least loaded in replicas of any kind (the draft's "least-loaded instance that
    # doesn't already have the task").
    standbys: dict[str, list[int]] = {m: [] for m in members}
    load = {m: len(actives[m]) + len(warmups[m]) for m in members}
    for j in tasks:
        taken = {owner[j], warming.get(j)}
        candidates = sorted(
            (m for m in members if m not in taken),
            key=lambda m: (heading.get(j) != m, rank[j].get(m, math.inf), load[m], consumer_sort_key(m)),
        )
        for m in candidates[: params.num_standbys]:
            standbys[m].append(j)
            load[m] += 1
    # Stateless partitions pack around the actives: each stays with its previous member while that one is
    # under the even share (stability, property 6), else goes to the member with the fewest.
    assignment = {m: list(held) for m, held in actives.items()}
    share = math.ceil(problem.size / len(members))
    for j in sorted(stateless, key=problem.keys.__getitem__):
        keep = problem.previous_owner[j]
        if keep in assignment and len(assignment[keep]) < share:
            assignment[keep].append(j)
        else:
            assignment[min(members, key=lambda m: (len(assignment[m]), consumer_sort_key(m)))].append(j)
    pending = any(warmups.values()) or bool(heading)

    def docs(groups: dict[str, list[int]]) -> dict[str, list[PartitionKey]]:
        return {m: [problem.keys[j] for j in held] for m, held in groups.items()}

    counts = [len(held) for held in actives.values()]
    return Packing(
        assignment,
        {
            "actives": docs(actives),
            "standbys": docs(standbys),
            "warmups": docs(warmups),
            "balanced": max(counts, default=0) - min(counts, default=0) <= params.balance_factor,
            "probing_rebalance_after_ms": params.probing_rebalance_interval_ms if pending else None,
        },
    )


def _ranks(problem: Problem, params: Kip441Params, members: list[str]) -> list[dict[str, float]]:
    """rank(T, I, acceptable_recovery_lag): lag, 0 within the acceptable lag; a member absent from a task's
    ranks does not host it and ranks last (math.inf), so the ranks take O(hosted) memory, not O(P·M)."""
    unknown = sorted(set(params.member_lags) - set(members))
    if unknown:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER, f"member_lags names members not in 'members': {', '.join(unknown)}."
        )
    rank: list[dict[str, float]] = [{} for _ in range(problem.size)]
    for member, lags in params.member_lags.items():
        for state in lags:
            j = _index_of(problem, state, f"member_lags of {member!r}")
            if member in rank[j]:
                raise AssignmentError(
                    ErrorCode.INVALID_PARAMETER,
                    f"member_lags of {member!r} lists {state.topic}/{state.partition} twice; list each partition once.",
                )
            rank[j][member] = 0 if state.lag <= params.acceptable_recovery_lag else state.lag
    return rank


def _most_caught_up(ranks: dict[str, float], members: list[str]) -> list[str]:
    """The members of the least rank, in `members` order; every member when none hosts the task."""
    if not ranks:
        return members
    least = min(ranks.values())
    return [m for m in members if ranks.get(m) == least]


def _index_of(problem: Problem, ref: PartitionRef, where: str) -> int:
    j = problem.index.get((ref.topic, ref.partition))
    if j is None:
        raise AssignmentError(
            ErrorCode.INVALID_PARAMETER, f"{where} names {ref.topic}/{ref.partition}, not a partition of the request."
        )
    return j


def _balanced(
    order: list[int],
    candidates: dict[int, list[str]],
    previous: dict[int, str],
    members: list[str],
    ceiling: int,
    balance_factor: int,
    problem: Problem,
) -> dict[str, list[int]]:
    """Each task to its previous owner while under the ceiling, else to the candidate with the fewest
    tasks under the ceiling, else back to its previous owner, else the candidate with the fewest. Then,
    while some member has more than balance_factor tasks above another candidate of one of its tasks,
    that task moves (the most loaded member first, its tasks in (topic, partition) order, to the
    candidate with the fewest; ties to the lowest id): the balance the KIP converges to."""
    held: dict[str, list[int]] = {m: [] for m in members}
    for j in order:
        options = candidates[j]
        keep = previous.get(j)
        if keep in options and len(held[keep]) < ceiling:
            chosen = keep
        else:
            under = [m for m in options if len(held[m]) < ceiling]
            if under:
                chosen = min(under, key=lambda m: (len(held[m]), consumer_sort_key(m)))
            elif keep in options:
                chosen = keep
            else:
                chosen = min(options, key=lambda m: (len(held[m]), consumer_sort_key(m)))
        held[chosen].append(j)
    while (move := _evening_move(held, candidates, members, balance_factor, problem)) is not None:
        j, source, destination = move
        held[source].remove(j)
        held[destination].append(j)
    return held


def _evening_move(
    held: dict[str, list[int]],
    candidates: dict[int, list[str]],
    members: list[str],
    balance_factor: int,
    problem: Problem,
) -> tuple[int, str, str] | None:
    """One move that narrows the counts by at least two (so the loop ends), or None."""
    for source in sorted(members, key=lambda m: (-len(held[m]), consumer_sort_key(m))):
        for j in sorted(held[source], key=problem.keys.__getitem__):
            lighter = [m for m in candidates[j] if len(held[source]) - len(held[m]) > max(1, balance_factor)]
            if lighter:
                return j, source, min(lighter, key=lambda m: (len(held[m]), consumer_sort_key(m)))
    return None


def _converged(
    tasks: list[int], caught_up: dict[int, list[str]], previous: dict[int, str], members: list[str], balance_factor: int
) -> bool:
    """The previous actives are all on most-caught-up members and balanced within the factor."""
    if any(previous.get(j) not in caught_up[j] for j in tasks):
        return False
    counts = {m: 0 for m in members}
    for j in tasks:
        counts[previous[j]] += 1
    return max(counts.values(), default=0) - min(counts.values(), default=0) <= balance_factor


register(
    Algorithm(
        name="kip441",
        description="KIP-441 lag-ranked assignment: actives on caught-up members, warm-ups, standbys, probing hint.",
        pack=pack,
        params=Kip441Params,
        source="KIP-441 Smooth Scaling Out for Kafka Streams (assignment and balance evaluation algorithms)",
    )
)
