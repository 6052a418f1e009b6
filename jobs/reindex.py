"""Reindex a repository into a new build and switch the index to it atomically.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python -m jobs.reindex --repo /path/to/repo --name myrepo [--full] [--allow-shrink]

Walk (honouring .gitignore, .git/info/exclude, core.excludesFile and .samespaceignore; never a
secret file) → skip generated/minified files → chunk by syntax (a file that cannot be chunked is
skipped, never fatal) → drop chunks holding a credential → refuse a build that would shrink the
serving index by accident (`--allow-shrink`) → plan against the serving build (incremental by
default: a chunk whose embedded text is unchanged keeps its vector; `--full` embeds everything)
→ embed the rest through the role's dispatcher (the gated fan-out pool of local and cloud
providers) → write reused and embedded rows into a fresh collection through the index actor →
commit (atomic switch). Nothing changed: no build at all. Failed or killed midway: the previous
build keeps serving; the partial build is dropped now (failure) or by the next run (kill).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import ray
from ray.actor import ActorHandle

from actors import get_index_actor
from actors.dispatcher import get_dispatcher
from actors.metrics import record_reindex
from cluster.cloud.budget import Priority
from cluster.cloud.key_readiness import wait_for_key
from cluster.errors import (
    CloudKeyMissing,
    NoProviderLeft,
    PathRefused,
    SamespaceError,
    ScanError,
    ShrinkRefused,
    original_error,
)
from cluster.gate.sentinel import reference_drifted, stored_baseline
from cluster.index.catalog import PointKey, embed_hash, point_id, point_key, point_payload
from cluster.index.incremental import PlanMode, ReusableRows, full_reason, plan_reindex
from cluster.index.keywords import chunk_keywords
from cluster.index.progress_meter import ProgressMeter
from cluster.index.records import (
    IndexRecord,
    export_folder,
    exports_root,
    index_of,
    new_build_id,
    validate_index_name,
)
from cluster.index.representations import name_text
from cluster.ingest.chunking import chunk_file
from cluster.ingest.generated import generated_reason
from cluster.ingest.git_state import SourceState, export_tree, source_state
from cluster.ingest.secret_scan import find_secrets
from cluster.ingest.skips import SkipLog, SkipReason, SkipSummary
from cluster.ingest.walker import walk_repository, walk_settings
from cluster.providers import NOT_ANSWERING
from cluster.roles import Role
from cluster.routing.dispatch import LandedBatch
from cluster.settings import SamespaceSettings, load_settings
from cluster.space import EncoderIdentity, embedding_text
from cluster.sync import admit_folder
from cluster.types import Chunk, StoredPoint, content_hash

log = logging.getLogger("samespace.reindex")

ROLE = Role.CODE_EMBEDDING  # one index space per repo; prose shares it while one local model serves both
WRITES_IN_FLIGHT = 4
PROGRESS_INTERVAL_S = 2.0
STARTUP_POLL_S = 2.0
REUSE_BATCH = 256  # reused rows per write, like a landed batch
EMBED_BLOCK = 256  # rows whose code texts, then name texts, go to the encoders side by side
KEY_PAGE = 2048  # serving rows per page read (keys only)
VECTOR_PAGE = 512  # serving rows per page read with vectors (512 x 2560 floats: 5 MB)


def _get(ref: Any) -> Any:
    """`ray.get` of one actor call. The actor handles are untyped, and Ray's stubs read `ray.get`
    of an untyped call as `list[Never]`: this says "whatever the actor returned"."""
    return ray.get(ref)


@dataclass(frozen=True)
class RepoChunks:
    """A walked and chunked repository: every chunk, its file, each file's path and hash, and what
    was left out (secret files, generated files, files that failed to chunk, chunks with secrets)."""

    chunks: list[Chunk]
    owners: list[int]  # per chunk: the index of its file
    paths: list[str]  # per file
    file_hashes: list[str]  # per file: sha256 of its text
    skipped: SkipSummary = field(default_factory=SkipSummary)

    @property
    def files(self) -> int:
        return len(self.paths)


@dataclass(frozen=True)
class _Reusable:
    vector: np.ndarray
    name_vector: np.ndarray
    provider: str
    writer: dict[str, Any]


def collect_repository(
    repo: Path, settings: SamespaceSettings, emit: Callable[[str], None] = lambda line: None
) -> RepoChunks:
    """Walk and chunk `repo`. One file never fails the walk: a file the chunker cannot handle is
    skipped with its reason, and a chunk holding a credential is dropped before anything embeds,
    stores or sends it. Only paths and reasons reach `emit`, never contents. A root that cannot
    be scanned raises ScanError."""
    chunking = settings.chunking
    skips = SkipLog()
    chunks: list[Chunk] = []
    owners: list[int] = []
    paths: list[str] = []
    file_hashes: list[str] = []
    for source in walk_repository(repo, walk_settings(settings), skips):
        reason = generated_reason(source.path, source.text)
        if reason is not None:
            skips.add(SkipReason.GENERATED, source.path)
            emit(f"skipped {source.path}: {reason}")
            continue
        try:
            file_chunks = chunk_file(source.path, source.text, chunking)
        except Exception as exc:  # noqa: BLE001 - one hostile file never fails the job (the chunker should not raise)
            skips.add(SkipReason.CHUNK_FAILED, source.path)
            emit(f"skipped {source.path}: the chunker failed ({type(exc).__name__})")
            continue
        # Scan the whole file once: a window in the middle of a long key holds neither its BEGIN nor END.
        secret_lines = [(f.line, f.end_line) for f in find_secrets(source.text)]
        kept = []
        for chunk in file_chunks:
            if any(start <= chunk.end_line and chunk.start_line <= end for start, end in secret_lines):
                skips.add(SkipReason.SECRET_CONTENT, source.path)
            else:
                kept.append(chunk)
        if file_chunks and not kept:
            continue  # nothing of this file may be served: it is not an indexed file at all
        chunks.extend(kept)
        owners.extend([len(paths)] * len(kept))
        paths.append(source.path)
        file_hashes.append(content_hash(source.text))
    return RepoChunks(chunks, owners, paths, file_hashes, skips.summary())


def report_skips(skipped: SkipSummary, emit: Callable[[str], None]) -> None:
    """The skip summary for the job log: counts per reason, then the paths of each (no contents)."""
    emit(skipped.line())
    for reason, paths in sorted(skipped.paths.items()):
        more = skipped.counts.get(reason, 0) - len(paths) if reason != SkipReason.SECRET_CONTENT.value else 0
        emit(f"  {reason}: {', '.join(paths)}" + (f" (and {more} more)" if more > 0 else ""))


def check_shrink(name: str, current: IndexRecord | None, found: RepoChunks, max_share: float) -> None:
    """Refuse a build that would replace a non-empty serving build with an empty one, or drop more
    than `max_share` of its files: an unmounted or emptied root must not wipe a good index."""
    if current is None or current.files == 0:
        return
    empty = found.files == 0 or not found.chunks
    if empty or current.files - found.files > max_share * current.files:
        raise ShrinkRefused(name, current.files, found.files, max_share)


def collect_chunks(repo: Path, settings: SamespaceSettings) -> tuple[list[Chunk], list[int], int]:
    """Every chunk of the repository, the file index of each chunk, and the file count."""
    found = collect_repository(repo, settings)
    return found.chunks, found.owners, found.files


def await_reference(
    ask: Callable[[], EncoderIdentity],
    timeout_s: float,
    emit: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> EncoderIdentity:
    """The reference identity, waiting while encoder actors are still starting (a cold cluster: a
    large model takes longer to load than discovery waits for an answer); other refusals fail now."""
    deadline = clock() + timeout_s
    while True:
        try:
            return ask()
        except NoProviderLeft as exc:
            starting = [r for r in exc.reasons if NOT_ANSWERING in r]
            if not starting or clock() >= deadline:
                raise
            emit(f"waiting for encoders to start: {'; '.join(starting)}")
            sleep(STARTUP_POLL_S)


def run_reindex(
    settings: SamespaceSettings,
    repo: Path,
    name: str,
    *,
    full: bool = False,
    allow_shrink: bool = False,
    ref: str | None = None,
    build_id: str | None = None,
    emit: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
) -> IndexRecord:
    """Reindex `repo` as `name`; incremental unless `full`. Returns the serving record (the
    unchanged current one when there was nothing to do). Refuses (ShrinkRefused) to drop more
    than `ingest.max_shrink_share` of the serving build's files unless `allow_shrink`.

    With `ref`, the files are those of that branch, tag or commit, exported from the repository's
    objects into the store's folder (the checkout is never touched) and served from there. A new
    index reuses the vectors of another index of the same folder and encoder space (a feature branch
    after its base). `build_id` names the build (`new_build_id`), as the caller that submitted the
    job announced it."""
    validate_index_name(name)
    repo = repo.resolve()
    if not repo.is_dir():
        raise ScanError(str(repo), "not a folder (missing, unmounted, or a file)")
    if settings.cloud.enabled:  # after a restart a durable cloud policy may have lost its key: say so, once
        from actors.config_push import key_problem

        missing = wait_for_key(
            lambda: key_problem(settings, (ROLE,)),
            wait_s=settings.cloud.key_wait_s,
            clock=clock,
            sleep=time.sleep,
            emit=emit,
        )
        if missing is not None:
            raise CloudKeyMissing(missing)
    source = source_state(repo, ref)
    emit(f"source: {_source_line(source)}")
    index = get_index_actor(settings)
    dispatcher = get_dispatcher(settings, ROLE)
    reference = await_reference(
        lambda: _get(dispatcher.reference.remote()), settings.embedding.startup_timeout_s, emit, clock
    )
    policy = settings.policy(ROLE)
    emit(f"reindex {name!r} from {repo} in space {reference.space_id} ({ROLE.value}, policy {policy.value})")

    current, drifted = _check_drift(index, dispatcher, name, reference, emit)
    # Before planning: with no provider left a reindex fails here, even one with nothing to embed.
    probe_vectors = _get(dispatcher.reference_probe.remote()).tolist()
    if ref is not None and not full and current is not None and current.source == source:
        emit(f"up to date: {ref} is still at {source.commit}")
        return current
    build = build_id or new_build_id(name, time.time())
    files_root = repo if ref is None else _export(settings, repo, source, build, emit)
    try:
        record = _build(
            settings,
            index,
            dispatcher,
            reference,
            name,
            build,
            files_root,
            repo,
            source,
            probe_vectors,
            current,
            drifted,
            full=full,
            allow_shrink=allow_shrink,
            emit=emit,
            clock=clock,
        )
    except BaseException:
        if files_root != repo:
            shutil.rmtree(files_root, ignore_errors=True)
        raise
    if files_root != repo:
        _drop_other_exports(settings, name, keep=Path(record.repo_root))
    return record


def _build(
    settings: SamespaceSettings,
    index: ActorHandle,
    dispatcher: ActorHandle,
    reference: EncoderIdentity,
    name: str,
    build: str,
    files_root: Path,
    repo: Path,
    source: SourceState,
    probe_vectors: list[list[float]],
    current: IndexRecord | None,
    drifted: bool,
    *,
    full: bool,
    allow_shrink: bool,
    emit: Callable[[str], None],
    clock: Callable[[], float],
) -> IndexRecord:
    """Walk `files_root`, plan against the serving build (or a donor), and build and commit `build`;
    or, when nothing changed, keep the serving build (its source state brought up to date)."""
    found = collect_repository(files_root, settings, emit)
    chunks = found.chunks
    emit(f"walked {found.files} files, {len(chunks)} chunks")
    report_skips(found.skipped, emit)
    if not allow_shrink:
        check_shrink(name, current, found, settings.ingest.max_shrink_share)

    hashes = [embed_hash(chunk) for chunk in chunks]
    keys = [
        point_key(name, chunk, found.file_hashes[owner], hashed)
        for chunk, owner, hashed in zip(chunks, found.owners, hashes, strict=True)
    ]
    base, base_drifted = current, drifted
    if current is None and not full:
        base, base_drifted = _donor(index, dispatcher, name, str(repo), reference, emit)
    base_keys = None
    if base is not None and full_reason(base, reference, full=full, reference_drifted=base_drifted) is None:
        base_keys = _read_point_keys(index, base.build)
    plan = plan_reindex(
        keys,
        reference,
        serving=base,
        serving_keys=base_keys,
        repo_root=str(files_root),
        full=full,
        reference_drifted=base_drifted,
    )
    if base is not None and base is not current and plan.mode is PlanMode.INCREMENTAL:
        plan = plan.model_copy(
            update={"reason": f"new index, unchanged vectors of {base.name!r}", "removed_files": [], "dropped_rows": 0}
        )
    emit(plan.line())
    if plan.mode is PlanMode.UP_TO_DATE:
        assert current is not None
        for leftover in _get(index.cleanup_partial.remote(name)):
            emit(f"dropped the partial build {leftover}")
        emit(f"up to date: {len(chunks)} chunks, nothing to embed")
        if current.source != source:
            current = _get(index.update_source.remote(name, source))
            emit(f"recorded source {_source_line(source)}")
        return current

    reusable: dict[str, _Reusable] = {}
    if plan.reuse:
        assert base is not None
        reusable = _read_reusable(index, base.build, {hashes[i] for i in plan.reuse})
    reuse = [i for i in plan.reuse if hashes[i] in reusable]
    vanished = [i for i in plan.reuse if hashes[i] not in reusable]  # rows gone since their keys were read
    embed = sorted(plan.embed + vanished)
    if vanished:
        emit(
            f"{len(vanished)} rows vanished from {base.build if base else '-'}: "
            f"reused {len(reuse)}, embedding {len(embed)}"
        )

    job_id = ray.get_runtime_context().get_job_id()
    _get(
        index.begin_build.remote(
            name, reference, str(files_root), job_id, probe_vectors, build=build, origin=str(repo), source=source
        )
    )
    emit(f"building {build}")
    try:
        embedded, kept = _write_build(
            index, dispatcher, reference, name, build, found, hashes, reuse, reusable, embed, emit, clock
        )
        providers = sorted(set(embedded) | set(kept))
        record: IndexRecord = _get(
            index.commit_build.remote(
                build,
                found.files,
                providers,
                found.skipped,
                embedded=sum(embedded.values()),
                reused=sum(kept.values()),
            )
        )
    except BaseException as exc:
        try:
            _get(index.fail_build.remote(build, f"{type(exc).__name__}: {exc}"))
        finally:
            emit(f"build {build} failed; the previous index keeps serving")
        raise
    emit(f"committed {record.name!r}: {record.chunks} chunks from {record.files} files, build {record.build}")
    emit(f"embedded {record.embedded}, reused {record.reused}; served by: {_counts(embedded) or '-'}")
    if kept:
        emit(f"reused vectors written by: {_counts(kept)}")
    return record


def _source_line(source: SourceState) -> str:
    if source.vcs != "git":
        return "a folder (no git)"
    where = f"{source.ref} " if source.ref else (f"{source.branch} " if source.branch else "detached ")
    return f"{where}at {source.commit or 'no commit yet'}" + (" with uncommitted changes" if source.dirty else "")


def _export(
    settings: SamespaceSettings, repo: Path, source: SourceState, build: str, emit: Callable[[str], None]
) -> Path:
    """Export the ref's files from the repository's objects into the build's own folder (0700)."""
    assert source.commit is not None
    target = export_folder(settings.store.data_dir, build)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.mkdir(mode=0o700)
    summary = export_tree(repo, source.commit, target, walk_settings(settings).max_file_bytes)
    emit(f"exported {summary.files} files of {source.ref} ({source.commit}) from the repository's objects")
    return target


def _drop_other_exports(settings: SamespaceSettings, name: str, keep: Path) -> None:
    """Remove the exported files of this index's earlier ref builds (the serving one stays)."""
    for folder in exports_root(settings.store.data_dir).iterdir():
        if index_of(folder.name) == name and folder.resolve() != keep.resolve():
            shutil.rmtree(folder, ignore_errors=True)


def _donor(
    index: ActorHandle,
    dispatcher: ActorHandle,
    name: str,
    folder: str,
    reference: EncoderIdentity,
    emit: Callable[[str], None],
) -> tuple[IndexRecord | None, bool]:
    """For a new index: the latest index of the same folder in the same space, whose unchanged
    vectors it may reuse (a branch's index after its base's), and whether the reference drifted from it."""
    records: list[IndexRecord] = _get(index.records.remote())
    donors = [r for r in records if r.name != name and r.followed_folder == folder and r.identity == reference]
    if not donors:
        return None, False
    donor = max(donors, key=lambda r: r.built_at or 0.0)
    emit(f"reusing unchanged vectors of index {donor.name!r} (same folder, same space)")
    return _check_drift(index, dispatcher, donor.name, reference, emit)


def _counts(by_provider: dict[str, int]) -> str:
    return ", ".join(f"{p}={n}" for p, n in sorted(by_provider.items()))


def _check_drift(
    index: ActorHandle, dispatcher: ActorHandle, name: str, reference: EncoderIdentity, emit: Callable[[str], None]
) -> tuple[IndexRecord | None, bool]:
    """DESIGN §12: before every reindex, re-probe the serving encoders against the serving index's
    stored probe vectors; drifted providers are evicted before they write a row. Returns the
    serving record and whether the reference itself (or the cloud anchor) no longer reproduces
    the index's probe vectors: then none of the index's vectors may be reused."""
    current: IndexRecord | None = _get(index.record.remote(name))
    stored = stored_baseline(current.probe_vectors) if current is not None else None
    if current is None or stored is None:
        return current, False
    reports = _get(dispatcher.sentinel.remote(stored))
    for report in reports:
        emit(f"sentinel: {report.line()}")
    drifted = reference_drifted(reports)
    if current.identity != reference:
        emit(
            f"the encoder changed since {name!r} was built ({current.identity.space_id} → {reference.space_id}): "
            "this reindex replaces it"
        )
    return current, drifted


def _read_point_keys(index: ActorHandle, build: str) -> list[PointKey | None]:
    """Every row key of a build, page by page (queries interleave between pages)."""
    keys: list[PointKey | None] = []
    offset: str | None = None
    while True:
        page, offset = _get(index.point_keys.remote(build, offset, KEY_PAGE))
        keys.extend(page)
        if offset is None:
            return keys


def _read_reusable(index: ActorHandle, build: str, wanted: set[str]) -> dict[str, _Reusable]:
    """The vectors (and writers) of a build's rows whose embed hash is wanted, page by page."""
    found: dict[str, _Reusable] = {}
    offset: str | None = None
    while len(found) < len(wanted):
        rows: ReusableRows
        rows, offset = _get(index.reusable_vectors.remote(build, offset, VECTOR_PAGE))
        for i, hashed in enumerate(rows.embed_hashes):
            if hashed in wanted and hashed not in found:
                provider, writer = rows.writers[rows.writer_of[i]]
                found[hashed] = _Reusable(rows.vectors[i], rows.name_vectors[i], provider, writer)
        if offset is None:
            break
    return found


def _write_build(
    index: ActorHandle,
    dispatcher: ActorHandle,
    reference: EncoderIdentity,
    name: str,
    build: str,
    found: RepoChunks,
    hashes: list[str],
    reuse: list[int],
    reusable: dict[str, _Reusable],
    embed: list[int],
    emit: Callable[[str], None],
    clock: Callable[[], float],
) -> tuple[dict[str, int], dict[str, int]]:
    """Write the reused rows and stream the embedded ones into the build; returns rows per
    provider, embedded and reused. The encoders start first and work while reused rows are written."""
    chunks, owners = found.chunks, found.owners
    remaining_per_file = [0] * found.files
    for owner in owners:
        remaining_per_file[owner] += 1
    meter = ProgressMeter(found.files, len(chunks), clock)
    meter.advance(files=sum(1 for n in remaining_per_file if n == 0))  # files with no chunks
    embedded: dict[str, int] = {}
    kept: dict[str, int] = {}
    writes: list[ray.ObjectRef] = []
    last_report = clock()

    def point(
        row: int, vectors: tuple[np.ndarray, np.ndarray], writer: EncoderIdentity | dict[str, Any], provider: str
    ) -> StoredPoint:
        chunk = chunks[row]
        return StoredPoint.model_construct(  # built from validated parts: skip re-validating 384+ floats per row
            id=point_id(name, chunk),
            vector=vectors[0].tolist(),
            name_vector=vectors[1].tolist(),
            payload=point_payload(
                name,
                chunk,
                reference,
                writer,
                provider,
                build,
                file_hash=found.file_hashes[owners[row]],
                hashed=hashes[row],
            ),
            sparse=chunk_keywords(chunk.text, chunk.path, chunk.symbol),
        )

    def landed(rows: list[int], points: list[StoredPoint], *, reused: bool) -> None:
        nonlocal last_report
        writes.append(index.write.remote(build, points))
        finished = 0
        for row in rows:
            remaining_per_file[owners[row]] -= 1
            finished += remaining_per_file[owners[row]] == 0
        if reused:
            meter.advance(reused=len(rows), files=finished)
        else:
            meter.advance(chunks=len(rows), files=finished)
        if len(writes) >= WRITES_IN_FLIGHT:
            ray.get(writes)
            writes.clear()
        now = clock()
        if now - last_report >= PROGRESS_INTERVAL_S or meter.chunks_done == meter.chunks_total:
            last_report = now
            emit(meter.line())
            index.report_progress.remote(build, meter.snapshot())

    # Similar lengths side by side: a batch pads to its longest text, so mixing wastes compute.
    # Longest first: the early rate is the pessimistic one, so the ETA only improves. Each row has
    # two texts (code, name); per block of rows the code texts go first, then the short name texts,
    # so a batch rarely pads a name to a code text's length and a row lands a block after it starts.
    order = sorted(embed, key=lambda i: len(chunks[i].text), reverse=True)
    slots: list[tuple[int, int]] = []  # per text sent: (row, 0 code | 1 name)
    for start in range(0, len(order), EMBED_BLOCK):
        block = order[start : start + EMBED_BLOCK]
        slots += [(row, 0) for row in block] + [(row, 1) for row in block]
    stream: Iterable[Any] = ()  # the embedded batches as they land (a Ray streaming generator)
    if slots:
        texts = [embedding_text(chunks[row]) if kind == 0 else name_text(chunks[row]) for row, kind in slots]
        stream = dispatcher.embed_stream.options(num_returns="streaming").remote(texts, name, Priority.BULK)
    for start in range(0, len(reuse), REUSE_BATCH):
        rows = reuse[start : start + REUSE_BATCH]
        points = []
        for row in rows:
            old = reusable[hashes[row]]
            points.append(point(row, (old.vector, old.name_vector), old.writer or reference, old.provider))
            kept[old.provider] = kept.get(old.provider, 0) + 1
        landed(rows, points, reused=True)
    halves: dict[int, tuple[np.ndarray | None, np.ndarray | None, EncoderIdentity | dict[str, Any], str]] = {}
    for ref in stream:
        batch: LandedBatch = _get(ref)  # NoProviderLeft surfaces here and fails the build
        done: list[int] = []
        points = []
        for i, vector in zip(batch.indices, batch.vectors, strict=True):
            row, kind = slots[i]
            code, name_vector, writer, provider = halves.get(row, (None, None, batch.identity or reference, ""))
            if kind == 0:  # the code vector's writer is the row's writer
                code, writer, provider = vector, batch.identity or reference, batch.provider
            else:
                name_vector = vector
            if code is None or name_vector is None:
                halves[row] = (code, name_vector, writer, provider)
                continue
            halves.pop(row, None)
            done.append(row)
            points.append(point(row, (code, name_vector), writer, provider))
            embedded[provider] = embedded.get(provider, 0) + 1
        if done:
            landed(done, points, reused=False)
    ray.get(writes)
    if meter.chunks_done == 0 or meter.chunks_done != meter.chunks_total:
        emit(meter.line())
    return embedded, kept


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # `ray job stop` sends SIGTERM: unwind so the build is dropped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.reindex", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="repository folder to index")
    parser.add_argument("--name", help="index (repo) name; default: the folder's name")
    parser.add_argument(
        "--full", action="store_true", help="embed every chunk again (default: reuse the vectors of unchanged chunks)"
    )
    parser.add_argument(
        "--allow-shrink",
        action="store_true",
        help="commit even when the new build drops more than ingest.max_shrink_share of the "
        "serving build's files (or all of them)",
    )
    parser.add_argument(
        "--ref", help="index this branch, tag or commit (from the repository's objects) instead of the folder"
    )
    parser.add_argument("--build-id", help="the build's id, as announced by whoever submitted the job")
    parser.add_argument(
        "--confined",
        action="store_true",
        help="an MCP client asked for this build: the folder must still lie inside index.allowed_roots",
    )
    args = parser.parse_args(argv)
    settings = load_settings()
    try:  # again, before anything is read: the folder may have changed since the build was asked for
        roots = settings.index.allowed_roots
        repo = admit_folder(str(args.repo.absolute()), roots, Path.home(), confined=args.confined)
    except PathRefused as refused:
        print(f"reindex failed: {refused}", file=sys.stderr, flush=True)
        return 2
    name = args.name or repo.name
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    ray.init(address=settings.ray.address, namespace=settings.ray.namespace, log_to_driver=False)
    started, ok = time.monotonic(), False
    try:
        run_reindex(
            settings,
            repo,
            name,
            full=args.full,
            allow_shrink=args.allow_shrink,
            ref=args.ref,
            build_id=args.build_id,
            emit=lambda line: print(line, flush=True),
        )
        ok = True
    except SamespaceError as exc:
        # Say the cause, once, without a remote traceback.
        print(f"reindex failed: {original_error(exc)}", file=sys.stderr, flush=True)
        return 2
    finally:  # exported as the driver exits (Ray flushes a driver's metrics at shutdown)
        record_reindex(name, time.monotonic() - started, ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
