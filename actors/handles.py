"""The one way to reach a named actor: get it, or start it the first time, detached in the namespace.

Ray finds actors by name (`get_if_exists`, `ray:doc/source/ray-core/doc_code/get_or_create.py`),
so every named actor of the cluster is started through `get_or_start` with its name from
`cluster.naming`, and looked up without starting through `find_actor`. The namespace and the
detached lifetime are spelled here only; placement (a node, resources, CPUs) is the caller's.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.actor import ActorHandle
from ray.core.generated.gcs_pb2 import ActorTableData  # type: ignore[attr-defined]  # made at import, no stubs

from cluster.settings import SamespaceSettings

__all__ = ["actor_state", "find_actor", "get_or_start", "named_actor"]


def get_or_start(actor_class: Any, settings: SamespaceSettings, name: str, *args: Any, **placement: Any) -> ActorHandle:
    """The actor `name` of this cluster's namespace; started detached from `actor_class(*args)` (an
    `@ray.remote` class) when none is alive. `placement`: more `.options` (resources, a node, CPUs)."""
    options = actor_class.options(
        name=name, namespace=settings.ray.namespace, lifetime="detached", get_if_exists=True, **placement
    )
    handle: ActorHandle = options.remote(*args)
    return handle


def named_actor(settings: SamespaceSettings, name: str) -> ActorHandle:
    """The live actor `name` of this cluster's namespace; ValueError (Ray's) when there is none."""
    return ray.get_actor(name, namespace=settings.ray.namespace)


def find_actor(settings: SamespaceSettings, name: str) -> ActorHandle | None:
    """The live actor `name`, or None: never starts one."""
    try:
        return named_actor(settings, name)
    except ValueError:
        return None


def actor_state(handle: ActorHandle) -> str | None:
    """The actor's lifecycle state as this process last heard it from Ray ("ALIVE", "RESTARTING",
    "DEAD", ...), or None when unknown. Ray tracks it per caller once a call was made; reading it
    needs no dashboard."""
    state = handle._get_local_state()  # noqa: SLF001 - Ray's one read of an actor's state that needs no dashboard
    return None if state is None else str(ActorTableData.ActorState.Name(state))
