"""The replica placement use case: a request → the plan of the chosen solver. Stateless: nothing is stored; the
API and `groupfit placement` (from a file or from a live cluster) both call `plan`."""

from __future__ import annotations

from app.codec.placement import PlacementRequest, PlacementResponse, answer_of, problem_of
from app.core.errors import AssignmentError, ErrorCode
from app.core.placement import place


def plan(request: PlacementRequest, max_partitions: int) -> PlacementResponse:
    if len(request.partitions) > max_partitions:
        raise AssignmentError(
            ErrorCode.TOO_MANY_PARTITIONS,
            f"{len(request.partitions)} partitions is more than this service takes ({max_partitions}); "
            "plan the topics in parts.",
        )
    return answer_of(place(problem_of(request), request.solver))
