"""The app's parts, built once by the factory, and each as a typed FastAPI dependency: a route declares what it
uses (`assigner: AssignServiceDep`), as it declares its token (app/api/auth.py).

The dependencies are coroutines: FastAPI runs a plain function dependency in a thread, a hop that costs more
than the lookup."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request
from starlette.applications import Starlette

from app.api.observability import Metrics
from app.service.access import Authorizer
from app.service.assign import AssignService
from app.service.compute import ComputePool
from app.service.evaluate import EvaluateService
from app.service.groups import GroupService
from app.service.operations import OperationsService
from app.service.placement import PlacementService
from app.settings import Settings
from app.store.groups import GroupStore

T = TypeVar("T")


@dataclass(frozen=True)
class Services:
    """Everything a request may use, built from the settings (app/api/factory.py `build_services`)."""

    settings: Settings
    metrics: Metrics
    store: GroupStore
    compute: ComputePool
    authorizer: Authorizer
    assigner: AssignService
    evaluator: EvaluateService
    groups: GroupService
    operations: OperationsService
    placements: PlacementService


def services_of(app: Starlette) -> Services:
    """The app's services (kept in its state by the factory)."""
    services: Services = app.state.services
    return services


def _part(part: Callable[[Services], T]) -> Callable[[Request], Coroutine[Any, Any, T]]:
    """A dependency giving one part of the app's services."""

    async def dependency(request: Request) -> T:
        return part(services_of(request.app))

    return dependency


SettingsDep = Annotated[Settings, Depends(_part(lambda s: s.settings))]
MetricsDep = Annotated[Metrics, Depends(_part(lambda s: s.metrics))]
StoreDep = Annotated[GroupStore, Depends(_part(lambda s: s.store))]
AuthorizerDep = Annotated[Authorizer, Depends(_part(lambda s: s.authorizer))]
AssignServiceDep = Annotated[AssignService, Depends(_part(lambda s: s.assigner))]
EvaluateServiceDep = Annotated[EvaluateService, Depends(_part(lambda s: s.evaluator))]
GroupServiceDep = Annotated[GroupService, Depends(_part(lambda s: s.groups))]
OperationsServiceDep = Annotated[OperationsService, Depends(_part(lambda s: s.operations))]
PlacementServiceDep = Annotated[PlacementService, Depends(_part(lambda s: s.placements))]
