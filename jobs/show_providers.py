"""Print which providers serve which role right now (asks every actor; nothing cached).

ray job submit --address http://127.0.0.1:8265 -- python -m jobs.show_providers
"""

from __future__ import annotations

import argparse
import sys

import ray

from actors.dispatcher import get_dispatcher
from cluster.providers import ProviderView
from cluster.roles import Role
from cluster.settings import load_settings


def format_views(role: Role, views: list[ProviderView]) -> list[str]:
    lines = [f"{role.value}:"]
    if not views:
        lines.append("  (no provider)")
    for v in views:
        p = v.provider
        state = "eligible" if p.eligible else f"INELIGIBLE ({p.reason})"
        applied = v.policy_applied.value if v.policy_applied else "-"
        upstream = f" @{p.upstream}" if p.upstream else ""
        lines.append(
            f"  {p.name:40} {p.kind.value:5} {p.model}{upstream}  policy {v.policy_in_force.value}/applied {applied}"
            f"  serves={v.serves}  {state}  served={p.served} failures={p.failures}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.show_providers", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    settings = load_settings()
    ray.init(address=settings.ray.address, namespace=settings.ray.namespace, log_to_driver=False)
    for role in Role:
        dispatcher = get_dispatcher(settings, role)
        views: list[ProviderView] = ray.get(dispatcher.providers.remote())
        print("\n".join(format_views(role, views)), flush=True)
        for report in ray.get(dispatcher.gate_reports.remote()):
            print(f"  gate: {report.line()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
