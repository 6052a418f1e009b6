"""A CPU embedder actor's torch threads: the node's cores shared by `embedding.cpu_actors`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cluster.local import actor_cpu_threads
from cluster.settings import EmbeddingSettings


@pytest.mark.parametrize(
    ("actors", "cores", "threads"),
    [(1, 2, 2), (2, 2, 1), (2, 16, 8), (3, 16, 5), (4, 2, 1)],  # never below one thread
)
def test_the_cores_are_shared_by_the_cpu_actors(actors: int, cores: int, threads: int) -> None:
    assert actor_cpu_threads(EmbeddingSettings(cpu_actors=actors), cores) == threads


def test_configured_cpu_threads_win_over_the_share() -> None:
    assert actor_cpu_threads(EmbeddingSettings(cpu_actors=2, cpu_threads=3), 16) == 3


@pytest.mark.parametrize("actors", [0, 65])
def test_a_cpu_actor_count_out_of_range_is_refused_naming_the_field(actors: int) -> None:
    with pytest.raises(ValidationError, match="cpu_actors"):
        EmbeddingSettings(cpu_actors=actors)
