"""Print which providers serve which role right now (asks every actor; nothing cached).

ray job submit --address http://127.0.0.1:8265 -- python -m jobs.show_providers
"""

from __future__ import annotations

import argparse
import sys

import ray

from actors.dispatcher import get_dispatcher
from cluster.providers import ProviderView, format_views
from cluster.roles import Role
from cluster.settings import load_settings


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
