"""A reindex, stage by stage: collect → shrink check → plan → embed and write → commit.

Written against the ports (`cluster.build.ports`): the job runs it with the index actor and the
role's dispatcher, a unit test with fakes. Nothing changed: no build at all (the serving build's
source state is brought up to date). Failed midway: the partial build is dropped and the previous
build keeps serving; killed midway, the next run drops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cluster.build.baseline import await_reference, check_drift
from cluster.build.collect import RepoChunks, collect_repository, report_skips
from cluster.build.exports import drop_export, drop_other_exports, export_ref
from cluster.build.feed import EarlyFeed, Segment
from cluster.build.history_build import HistoryStep
from cluster.build.planning import BuildPlan, embeds_everything, plan_base, plan_build
from cluster.build.ports import BUILD_ROLE, BuildPorts, Emit
from cluster.build.request import BuildRequest, BuildTarget
from cluster.build.shrink import check_shrink
from cluster.build.stages import Stage, StageTimes
from cluster.build.writer import BuildWriter
from cluster.cloud import wait_for_key
from cluster.errors import CloudKeyMissing, ScanError
from cluster.index import IndexRecord, PlanMode, new_build_id, validate_index_name
from cluster.ingest import SourceState, source_state
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity
from cluster.types import Clock


def source_line(source: SourceState) -> str:
    """e.g. 'main at 1a2b3c with uncommitted changes', or 'a folder (no git)'."""
    if source.vcs != "git":
        return "a folder (no git)"
    where = f"{source.ref} " if source.ref else (f"{source.branch} " if source.branch else "detached ")
    return f"{where}at {source.commit or 'no commit yet'}" + (" with uncommitted changes" if source.dirty else "")


def provider_counts(by_provider: Mapping[str, int]) -> str:
    return ", ".join(f"{p}={n}" for p, n in sorted(by_provider.items()))


class Reindex:
    """Reindexes folders into indexes through `ports`, writing its log lines to `emit`."""

    def __init__(
        self,
        ports: BuildPorts,
        settings: SamespaceSettings,
        emit: Emit,
        *,
        clock: Clock = time.monotonic,
        wall_clock: Clock = time.time,
        sleep: Callable[[float], None] = time.sleep,
        timer: Clock = time.perf_counter,
    ) -> None:
        self._ports = ports
        self._settings = settings
        self._emit = emit
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._timer = timer
        self._stages = StageTimes(timer)

    def run(self, request: BuildRequest) -> IndexRecord:
        """Reindex `request.repo` as `request.name`; incremental unless `full`. Returns the serving
        record (the unchanged current one when there was nothing to do). Refuses (ShrinkRefused) to
        drop more than `ingest.max_shrink_share` of the serving build's files unless `allow_shrink`.

        With `ref`, the files are those of that branch, tag or commit, exported from the repository's
        objects into the store's folder and served from there. A new index reuses the vectors of
        another index of the same folder and encoder space (a feature branch after its base).

        A build's last line says where its time went (`cluster.build.stages`)."""
        settings, emit, ports = self._settings, self._emit, self._ports
        name, ref = request.name, request.ref
        validate_index_name(name)
        repo = request.repo.resolve()
        if not repo.is_dir():
            raise ScanError(str(repo), "not a folder (missing, unmounted, or a file)")
        self._stages = stages = StageTimes(self._timer)
        with stages.timing(Stage.PREPARE):
            self._require_key()
            source = source_state(repo, ref)
            emit(f"source: {source_line(source)}")
            reference = await_reference(
                ports.encoders.reference, settings.embedding.startup_timeout_s, emit, self._clock, self._sleep
            )
            policy = f"{BUILD_ROLE.value}, policy {settings.policy(BUILD_ROLE).value}"
            emit(f"reindex {name!r} from {repo} in space {reference.space_id} ({policy})")
            current, drifted = check_drift(ports.index, ports.encoders, name, reference, emit)
            # Before planning: with no provider left a reindex fails here, even one with nothing to embed.
            probe_vectors = ports.encoders.reference_probe()
        if ref is not None and not request.full and current is not None and current.source == source:
            emit(f"up to date: {ref} is still at {source.commit}")
            self._history(name, repo, source, reference)
            return current
        build = request.build_id or new_build_id(name, self._wall_clock())
        files_root = repo if ref is None else export_ref(settings, repo, source, build, emit)
        target = BuildTarget(name, build, reference, repo, files_root)
        try:
            record = self._build(target, request, source, probe_vectors, (current, drifted))
        except BaseException:
            if files_root != repo:
                drop_export(files_root)
            raise
        if files_root != repo:
            drop_other_exports(settings, name, keep=Path(record.repo_root))
        with stages.timing(Stage.HISTORY):
            self._history(name, repo, source, reference)
        emit(stages.line())
        return record

    def _history(self, name: str, repo: Path, source: SourceState, reference: EncoderIdentity) -> None:
        """Mine the commits since the last build (`cluster.build.history_build`). The index is built
        already: a history that cannot be mined is said in the log and fails nothing."""
        try:
            HistoryStep(self._ports, self._settings, self._emit, self._clock).run(name, repo, source, reference)
        except Exception as exc:  # noqa: BLE001 - the history is beside the index, never a reason to fail it
            self._emit(f"history: not mined: {type(exc).__name__}: {exc}")

    def _require_key(self) -> None:
        """After a restart a durable cloud policy may have lost its key: say so, once (CloudKeyMissing)."""
        if not self._settings.cloud.enabled:
            return
        missing = wait_for_key(
            self._ports.key_problem,
            wait_s=self._settings.cloud.key_wait_s,
            clock=self._clock,
            sleep=self._sleep,
            emit=self._emit,
        )
        if missing is not None:
            raise CloudKeyMissing(missing)

    def _build(
        self,
        target: BuildTarget,
        request: BuildRequest,
        source: SourceState,
        probe_vectors: list[list[float]],
        serving: tuple[IndexRecord | None, bool],
    ) -> IndexRecord:
        """Walk the files, plan against the serving build (or a donor), and build and commit; or,
        when nothing changed, keep the serving build (its source state brought up to date). A build
        that embeds every chunk starts the encoders during the walk (`cluster.build.feed`)."""
        emit, index, stages = self._emit, self._ports.index, self._stages
        with stages.timing(Stage.PLAN):
            base = plan_base(index, self._ports.encoders, target, serving, full=request.full, emit=emit)
        early = (
            EarlyFeed(self._ports.encoders, target, stages)
            if embeds_everything(target, base, full=request.full)
            else None
        )
        try:
            found = collect_repository(
                target.files_root, self._settings, emit, stages, early.collected if early is not None else None
            )
            emit(f"walked {found.files} files, {len(found.chunks)} chunks")
            if early is not None and early.segments:
                emit(early.line(len(found.chunks)))
            report_skips(found.skipped, emit)
            with stages.timing(Stage.PLAN):
                if not request.allow_shrink:
                    check_shrink(target.name, serving[0], found, self._settings.ingest.max_shrink_share)
                plan = plan_build(
                    index, self._ports.encoders, target, found, serving, full=request.full, emit=emit, reuse_from=base
                )
            emit(plan.plan.line())
            if plan.plan.mode is not PlanMode.FULL and early is not None:  # not expected: it was planned as full
                early.close()
                early = None
            if plan.plan.mode is PlanMode.UP_TO_DATE:
                assert serving[0] is not None  # an up-to-date plan was made against a serving build
                return self._keep_serving(serving[0], source, len(found.chunks))
            with stages.timing(Stage.BEGIN):
                index.begin_build(target, probe_vectors, source, len(found.chunks))
        except BaseException:
            if early is not None:
                early.close()
            raise
        emit(f"building {target.build}")
        return self._write_and_commit(target, found, plan, early.segments if early is not None else [])

    def _keep_serving(self, current: IndexRecord, source: SourceState, chunks: int) -> IndexRecord:
        index, emit = self._ports.index, self._emit
        for leftover in index.cleanup_partial(current.name):
            emit(f"dropped the partial build {leftover}")
        emit(f"up to date: {chunks} chunks, nothing to embed")
        if current.source != source:
            current = index.update_source(current.name, source)
            emit(f"recorded source {source_line(source)}")
        return current

    def _write_and_commit(
        self, target: BuildTarget, found: RepoChunks, plan: BuildPlan, early: Sequence[Segment]
    ) -> IndexRecord:
        """Write the build's rows (`early`: segments sent during the walk) and commit it; on any
        failure drop it and re-raise."""
        index, emit = self._ports.index, self._emit
        try:
            writer = BuildWriter(
                index, self._ports.encoders, target, found, plan, emit, self._clock, self._stages, early
            )
            tally = writer.write()
            with self._stages.timing(Stage.VECTOR_INDEX):
                started = self._clock()
                if index.index_vectors(target.build):
                    emit(f"vector index built in {self._clock() - started:.1f}s")
            with self._stages.timing(Stage.COMMIT):
                record = index.commit_build(
                    target.build,
                    found.files,
                    sorted(set(tally.embedded) | set(tally.kept)),
                    found.skipped,
                    embedded=tally.embedded.total(),
                    reused=tally.kept.total(),
                )
        except BaseException as exc:
            try:
                index.fail_build(target.build, f"{type(exc).__name__}: {exc}")
            finally:
                emit(f"build {target.build} failed; the previous index keeps serving")
            raise
        emit(f"committed {record.name!r}: {record.chunks} chunks from {record.files} files, build {record.build}")
        emit(f"embedded {record.embedded}, reused {record.reused}; served by: {provider_counts(tally.embedded) or '-'}")
        if tally.kept:
            emit(f"reused vectors written by: {provider_counts(tally.kept)}")
        return record
