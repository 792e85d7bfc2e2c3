"""An independent optimum for small placement problems: every placement enumerated (each partition's replica
set among the sets of distinct brokers, in distinct racks with racks), the infeasible ones dropped as soon as a
broker overflows or the byte budget is spent, the best kept by the objective's criteria in order.

It reads only the problem's numbers (sizes, network units, limits, current brokers) and computes every
criterion itself in whole numbers — bytes moved, brokers used, the peak utilisation in steps of 1/STEPS rounded
up — sharing no code with the solvers it checks."""

from __future__ import annotations

from itertools import combinations

from app.core.placement.model import PlacementProblem

STEPS = 10**4
ORDER = {"moves": ("bytes", "peak"), "balance": ("peak", "bytes"), "brokers": ("brokers", "bytes", "peak")}


def vector(problem: PlacementProblem, sets: list[list[int]]) -> tuple[int, ...]:
    """A placement's criteria in its objective's order, in whole numbers."""
    disk, network = [0] * len(problem.brokers), [0] * len(problem.brokers)
    moved = 0
    for part, flow, held, current in zip(problem.partitions, problem.flow, sets, problem.current):
        for b in held:
            disk[b] += part.size
            network[b] += flow
            moved += part.size if b not in current else 0
    peak = max(
        max(-(-STEPS * load // broker.disk) for load, broker in zip(disk, problem.brokers)),
        max(-(-STEPS * load // full) for load, full in zip(network, problem.network_full)),
    )
    values = {"bytes": moved, "peak": peak, "brokers": len({b for held in sets for b in held})}
    return tuple(values[name] for name in ORDER[problem.options.objective.value])


def optimum(problem: PlacementProblem) -> tuple[tuple[int, ...], list[list[int]]] | None:
    """(the least criteria vector, a placement reaching it), or None when no placement is feasible."""
    brokers = range(len(problem.brokers))
    parts = problem.partitions
    budget = problem.options.max_bytes_moved
    choices = [
        [
            list(chosen)
            for chosen in combinations(brokers, len(part.replicas))
            if not problem.rack_aware or len({problem.rack_of[b] for b in chosen}) == len(chosen)
        ]
        for part in parts
    ]
    disk, network = [0] * len(brokers), [0] * len(brokers)
    placement: list[list[int]] = []
    best: list[tuple[tuple[int, ...], list[list[int]]]] = []

    def visit(p: int, moved: int) -> None:
        if budget is not None and moved > budget:
            return
        if any(disk[b] > problem.disk_limit[b] or network[b] > problem.network_limit[b] for b in brokers):
            return
        if p == len(parts):
            key = vector(problem, placement)
            if not best or key < best[0][0]:
                best[:] = [(key, [list(held) for held in placement])]
            return
        part, flow = parts[p], problem.flow[p]
        for chosen in choices[p]:
            for b in chosen:
                disk[b] += part.size
                network[b] += flow
            placement.append(chosen)
            visit(p + 1, moved + part.size * sum(1 for b in chosen if b not in problem.current[p]))
            placement.pop()
            for b in chosen:
                disk[b] -= part.size
                network[b] -= flow

    visit(0, 0)
    return best[0] if best else None
