"""Reindex a repository into a new build and switch the index to it atomically.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python -m jobs.reindex --repo /path/to/repo --name myrepo

Walk (honouring .gitignore) → chunk by syntax → embed through the role's dispatcher (the gated
fan-out pool of local and cloud providers) → write into a fresh collection through the index
actor → commit (atomic switch). Failed or killed midway: the previous build keeps serving; the partial build is
dropped now (failure) or by the next run (kill).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import numpy as np
import ray
from ray.actor import ActorHandle

from actors import get_index_actor
from actors.dispatcher import get_dispatcher
from cluster.chunking import chunk_file
from cluster.errors import SamespaceError
from cluster.dispatch import LandedBatch
from cluster.index import IndexRecord, point_id, point_payload, validate_index_name
from cluster.progress import ProgressMeter
from cluster.budget import Priority
from cluster.roles import Role
from cluster.settings import SamespaceSettings, load_settings
from cluster.space import EncoderIdentity, embedding_text
from cluster.types import Chunk, StoredPoint
from cluster.walker import WalkSettings, walk_repository

log = logging.getLogger("samespace.reindex")

ROLE = Role.CODE_EMBEDDING  # one index space per repo; prose shares it while one local model serves both
WRITES_IN_FLIGHT = 4
PROGRESS_INTERVAL_S = 2.0


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
    dispatcher = get_dispatcher(settings, ROLE)
    reference: EncoderIdentity = ray.get(dispatcher.reference.remote())
    policy = settings.policy(ROLE)
    emit(f"reindex {name!r} from {repo} in space {reference.space_id} ({ROLE.value}, policy {policy.value})")

    _check_drift(index, dispatcher, name, reference, emit)
    probe_vectors = ray.get(dispatcher.reference_probe.remote()).tolist()
    chunks, owners, files_total = collect_chunks(repo, settings)
    emit(f"walked {files_total} files, {len(chunks)} chunks")
    job_id = ray.get_runtime_context().get_job_id()
    build: str = ray.get(index.begin_build.remote(name, reference, str(repo), job_id, probe_vectors))
    emit(f"building {build}")
    try:
        providers = _embed_and_write(index, dispatcher, reference, name, build, chunks, owners, files_total, emit, clock)
        record: IndexRecord = ray.get(index.commit_build.remote(build, files_total, sorted(providers)))
    except BaseException as exc:
        try:
            ray.get(index.fail_build.remote(build, f"{type(exc).__name__}: {exc}"))
        finally:
            emit(f"build {build} failed; the previous index keeps serving")
        raise
    served = ", ".join(f"{p}={n}" for p, n in sorted(providers.items()))
    emit(f"committed {record.name!r}: {record.chunks} chunks from {record.files} files, build {record.build}")
    emit(f"served by: {served}")
    return record


def _check_drift(
    index: ActorHandle, dispatcher: ActorHandle, name: str, reference: EncoderIdentity, emit: Callable[[str], None]
) -> None:
    """SPEC §12: before every reindex, re-probe the serving encoders against the serving index's
    stored probe vectors; drifted providers are evicted before they write a row."""
    current = ray.get(index.record.remote(name))
    if current is None or current.probe_vectors is None:
        return
    stored = np.asarray(current.probe_vectors, dtype=np.float32)
    for report in ray.get(dispatcher.sentinel.remote(stored)):
        emit(f"sentinel: {report.line()}")
    if current.identity != reference:
        emit(f"the encoder changed since {name!r} was built ({current.identity.space_id} → {reference.space_id}): "
             "this reindex replaces it")


def _embed_and_write(
    index: ActorHandle,
    dispatcher: ActorHandle,
    reference: EncoderIdentity,
    name: str,
    build: str,
    chunks: list[Chunk],
    owners: list[int],
    files_total: int,
    emit: Callable[[str], None],
    clock: Callable[[], float],
) -> dict[str, int]:
    """Stream batches from the role's fan-out pool into the build; returns chunks per provider."""
    # Similar lengths side by side: a batch pads to its longest text, so mixing wastes compute.
    # Longest first: the early rate is the pessimistic one, so the ETA only improves.
    order = sorted(range(len(chunks)), key=lambda i: len(chunks[i].text), reverse=True)
    remaining_per_file = [0] * files_total
    for owner in owners:
        remaining_per_file[owner] += 1
    meter = ProgressMeter(files_total, len(chunks), clock)
    meter.advance(files=sum(1 for n in remaining_per_file if n == 0))  # files with no chunks
    served: dict[str, int] = {}
    writes: list[ray.ObjectRef] = []
    last_report = clock()
    stream = dispatcher.embed_stream.options(num_returns="streaming").remote(
        [embedding_text(chunks[i]) for i in order], name, Priority.BULK
    )
    for ref in stream:
        batch: LandedBatch = ray.get(ref)  # NoProviderLeft surfaces here and fails the build
        rows = [order[i] for i in batch.indices]
        identity = batch.identity or reference
        points = [  # built from validated parts: skip re-validating 384+ floats per row
            StoredPoint.model_construct(
                id=point_id(name, chunks[row]),
                vector=vector.tolist(),
                payload=point_payload(name, chunks[row], reference, identity, batch.provider, build),
            )
            for row, vector in zip(rows, batch.vectors, strict=True)
        ]
        writes.append(index.write.remote(build, points))
        served[batch.provider] = served.get(batch.provider, 0) + len(rows)
        finished = 0
        for row in rows:
            remaining_per_file[owners[row]] -= 1
            finished += remaining_per_file[owners[row]] == 0
        meter.advance(chunks=len(rows), files=finished)
        if len(writes) >= WRITES_IN_FLIGHT:
            ray.get(writes)
            writes.clear()
        now = clock()
        if now - last_report >= PROGRESS_INTERVAL_S or meter.chunks_done == meter.chunks_total:
            last_report = now
            emit(meter.line())
            index.report_progress.remote(build, meter.snapshot())
    ray.get(writes)
    if meter.chunks_done == 0 or meter.chunks_done != meter.chunks_total:
        emit(meter.line())
    return served


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
