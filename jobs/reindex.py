"""Reindex a repository into a new build and switch the index to it atomically.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python -m jobs.reindex --repo /path/to/repo --name myrepo

Walk (honouring .gitignore) → chunk by syntax → embed on the embedder actors (every lane keeps
batches in flight) → write into a fresh collection through the index actor → commit (atomic
switch). Failed or killed midway: the previous build keeps serving; the partial build is
dropped now (failure) or by the next run (kill).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import ray
from ray.actor import ActorHandle

from actors import ensure_embedders, get_index_actor
from cluster.chunking import chunk_file
from cluster.errors import SamespaceError
from cluster.index import IndexRecord, point_id, point_payload, validate_index_name
from cluster.progress import ProgressMeter
from cluster.settings import SamespaceSettings, load_settings
from cluster.space import EncoderIdentity, embedding_text
from cluster.types import Chunk, StoredPoint
from cluster.walker import WalkSettings, walk_repository

log = logging.getLogger("samespace.reindex")

BATCHES_IN_FLIGHT_PER_LANE = 3  # one encoding, two queued: the lane never idles on the driver
PROGRESS_INTERVAL_S = 2.0


@dataclass(frozen=True)
class _Batch:
    chunks: list[Chunk]
    files: list[int]  # file index of each chunk


def collect_chunks(repo: Path, settings: SamespaceSettings) -> tuple[list[Chunk], list[int], int]:
    """Every chunk of the repository, the file index of each chunk, and the file count."""
    chunking = settings.chunking
    walk = WalkSettings(max_file_bytes=chunking.max_file_bytes)
    chunks: list[Chunk] = []
    owners: list[int] = []
    files = 0
    for source in walk_repository(repo, walk):
        file_chunks = chunk_file(source.path, source.text, chunking)
        chunks.extend(file_chunks)
        owners.extend([files] * len(file_chunks))
        files += 1
    return chunks, owners, files


def common_identity(embedders: Sequence[ActorHandle]) -> EncoderIdentity:
    """Every lane must serve the same encoder space (the full gate arrives with the gate issue)."""
    identities: list[EncoderIdentity] = ray.get([e.identity.remote() for e in embedders])
    first = identities[0]
    for identity in identities[1:]:
        if identity != first:
            raise SamespaceError(f"embedders disagree: {first.space_id} vs {identity.space_id}")
    return first


def run_reindex(
    settings: SamespaceSettings,
    repo: Path,
    name: str,
    *,
    emit: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> IndexRecord:
    validate_index_name(name)
    repo = repo.resolve()
    if not repo.is_dir():
        raise SamespaceError(f"--repo {str(repo)!r} is not a directory")
    index = get_index_actor(settings)
    embedders = ensure_embedders(settings)
    lanes = [info.name for info in ray.get([e.describe.remote() for e in embedders])]
    identity = common_identity(embedders)
    emit(f"reindex {name!r} from {repo} in space {identity.space_id} on {len(lanes)} lane(s): {', '.join(lanes)}")

    chunks, owners, files_total = collect_chunks(repo, settings)
    emit(f"walked {files_total} files, {len(chunks)} chunks")
    job_id = ray.get_runtime_context().get_job_id()
    build: str = ray.get(index.begin_build.remote(name, identity, str(repo), job_id))
    emit(f"building {build}")
    try:
        _embed_and_write(settings, index, embedders, lanes, identity, name, build, chunks, owners, files_total, emit, clock)
        record: IndexRecord = ray.get(index.commit_build.remote(build, files_total, lanes))
    except BaseException as exc:
        try:
            ray.get(index.fail_build.remote(build, f"{type(exc).__name__}: {exc}"))
        finally:
            emit(f"build {build} failed; the previous index keeps serving")
        raise
    emit(f"committed {record.name!r}: {record.chunks} chunks from {record.files} files, build {record.build}")
    return record


def _embed_and_write(
    settings: SamespaceSettings,
    index: ActorHandle,
    embedders: Sequence[ActorHandle],
    lanes: Sequence[str],
    identity: EncoderIdentity,
    name: str,
    build: str,
    chunks: list[Chunk],
    owners: list[int],
    files_total: int,
    emit: Callable[[str], None],
    clock: Callable[[], float],
) -> None:
    size = settings.embedding.batch_size
    # Batches of similar length: padding to the longest text of a batch is wasted compute
    # (encode() sorts within one call; across calls that is our job). Longest first: the
    # early rate is the pessimistic one, so the ETA only improves.
    order = sorted(range(len(chunks)), key=lambda i: len(chunks[i].text), reverse=True)
    queue = deque(
        _Batch([chunks[i] for i in order[j : j + size]], [owners[i] for i in order[j : j + size]])
        for j in range(0, len(order), size)
    )
    remaining_per_file = [0] * files_total
    for owner in owners:
        remaining_per_file[owner] += 1
    meter = ProgressMeter(files_total, len(chunks), clock)
    meter.advance(files=sum(1 for n in remaining_per_file if n == 0))  # files with no chunks
    in_flight: dict[ray.ObjectRef, tuple[int, _Batch]] = {}
    writes: list[ray.ObjectRef] = []
    load = [0] * len(embedders)
    last_report = clock()

    def fill() -> None:
        for lane, embedder in enumerate(embedders):
            while load[lane] < BATCHES_IN_FLIGHT_PER_LANE and queue:
                batch = queue.popleft()
                texts = [embedding_text(c) for c in batch.chunks]
                in_flight[embedder.encode_batch.remote(texts)] = (lane, batch)
                load[lane] += 1

    fill()
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        lane, batch = in_flight.pop(ready[0])
        load[lane] -= 1
        vectors = ray.get(ready[0])  # a lane failure raises here and fails the build
        fill()
        points = [  # built from validated parts: skip re-validating 384+ floats per row
            StoredPoint.model_construct(
                id=point_id(name, chunk),
                vector=vector.tolist(),
                payload=point_payload(name, chunk, identity, lanes[lane], build),
            )
            for chunk, vector in zip(batch.chunks, vectors, strict=True)
        ]
        writes.append(index.write.remote(build, points))
        finished = 0
        for owner in batch.files:
            remaining_per_file[owner] -= 1
            finished += remaining_per_file[owner] == 0
        meter.advance(chunks=len(batch.chunks), files=finished)
        if len(writes) >= 4:
            ray.get(writes)
            writes.clear()
        now = clock()
        if now - last_report >= PROGRESS_INTERVAL_S or not in_flight:
            last_report = now
            emit(meter.line())
            index.report_progress.remote(build, meter.snapshot())
    ray.get(writes)


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # `ray job stop` sends SIGTERM: unwind so the build is dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.reindex", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="repository folder to index")
    parser.add_argument("--name", help="index (repo) name; default: the folder's name")
    args = parser.parse_args(argv)
    name = args.name or args.repo.resolve().name
    settings = load_settings()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    ray.init(address=settings.ray.address, namespace=settings.ray.namespace, log_to_driver=False)
    try:
        run_reindex(settings, args.repo, name, emit=lambda line: print(line, flush=True))
    except SamespaceError as exc:
        print(f"reindex failed: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
