"""samespace/ray_head.py: Ray's `ray start` with only the dashboard modules `samespace run` uses."""

from __future__ import annotations

from typing import Any

from samespace.ray_head import LEAN_DASHBOARD_MODULES, _lean_start_ray_process, dashboard_command


def test_the_dashboard_loads_only_the_jobs_nodes_and_serve_modules() -> None:
    command = ["python", "dashboard.py", "--host=127.0.0.1"]
    assert dashboard_command(command) == [*command, "--modules-to-load=JobHead,NodeHead,ServeHead"]
    assert LEAN_DASHBOARD_MODULES == ("JobHead", "NodeHead", "ServeHead")


def test_a_module_list_already_chosen_is_kept() -> None:
    command = ["python", "dashboard.py", "--modules-to-load=UsageStatsHead"]
    assert dashboard_command(command) == command


def test_only_the_dashboard_process_is_changed() -> None:
    started: list[tuple[list[str], str]] = []

    def original(command: list[str], process_type: str, **kwargs: Any) -> str:
        started.append((command, process_type))
        return "process"

    start = _lean_start_ray_process(original, "dashboard")
    assert start(["raylet", "--x"], "raylet", fate_share=True) == "process"
    start(["python", "dashboard.py"], "dashboard")
    assert started == [
        (["raylet", "--x"], "raylet"),
        (["python", "dashboard.py", "--modules-to-load=JobHead,NodeHead,ServeHead"], "dashboard"),
    ]
