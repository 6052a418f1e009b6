"""The MCP resources of a replica: the indexes, each index's status and each indexed file, read by URI
(`cluster.search.resource_uris`), and subscriptions to their changes.

    resources/list            samespace://indexes, and samespace://index/{name}/status of every index
    resources/templates/list  the status and the file templates (files are not listed, there may be
                              millions: completion/complete offers index names and file paths)
    resources/read            JSON for the list and a status; a file's text, typed by its language
    subscriptions/listen      notifications/resources/updated for the URIs asked for, on that stream

Subscriptions ride the 2026-07-28 wire (SEP-2575): no session and no standing GET stream; a client
sends `subscriptions/listen` naming the URIs, and the response to that one POST is the stream its
events ride. Any replica can answer it, so /mcp stays stateless behind Serve's routing: the replica
holding a stream watches the recorded index state for it (`cluster.search.StatusWatch`, once a second,
only while it holds one) and publishes each change on the bus its two MCP servers (JSON and SSE)
share. The watch reads every index; the bus (`ReaderBus`) holds each stream with the reader of the
caller that opened it and tells a stream only of changes to indexes that reader may read (`index.acl`).
Every other read (the list, a status, a file, a completion) is the request's caller's, as the tools'.
`resources/subscribe` (the 2025 wire) is not offered: a stateless server has no session to
push to later, so the handshake-era capability `resources.subscribe` stays false.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

import anyio.lowlevel
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.subscriptions import ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    Resource,
    ResourceTemplateReference,
)
from ray.exceptions import RayError

from cluster.auth import Reader, current_reader
from cluster.errors import SamespaceError, original_error
from cluster.index import UNRESTRICTED_READER, IndexAcl
from cluster.ingest import SourceLines
from cluster.search import (
    FILE_TEMPLATE,
    INDEXES_URI,
    JSON_MIME,
    STATUS_POLL_S,
    STATUS_TEMPLATE,
    CodeSearchService,
    FileRef,
    IndexList,
    IndexStatus,
    ResourceChanges,
    StatusRef,
    StatusWatch,
    check_file_path,
    check_index_name,
    mime_type_of,
    parse_resource_uri,
    status_of_index,
    status_uri,
)
from cluster.settings import LimitsSettings
from serve_apps.mcp._calls import cluster_unavailable
from serve_apps.mcp._sidecar_routes import REPLICA_MAX_ONGOING_REQUESTS

log = logging.getLogger("samespace.resources")

MAX_LISTEN_STREAMS = REPLICA_MAX_ONGOING_REQUESTS // 4  # each stream holds one of the replica's request slots
MAX_COMPLETIONS = 50  # the spec allows 100 values
MAX_COMPLETION_CHARS = 200


class ReaderBus:
    """The replica's subscription bus (`mcp.server.subscriptions.SubscriptionBus`): each listener (one
    per `subscriptions/listen` stream) is held with the reader of the caller that opened the stream,
    captured as the stream subscribes, and hears an event only when it concerns an index that reader
    may read (`publish_about`); an event about no index reaches every stream."""

    def __init__(self, acl: IndexAcl) -> None:
        self._acl = acl
        self._listeners: dict[object, tuple[Callable[[ServerEvent], None], Reader]] = {}

    async def publish(self, event: ServerEvent) -> None:
        """`event` to the streams it concerns: a status or file URI's index, else every stream."""
        about = None
        if isinstance(event, ResourceUpdated):
            try:
                ref = parse_resource_uri(event.uri)
            except SamespaceError:
                ref = None
            about = [ref.name] if isinstance(ref, (StatusRef, FileRef)) else None
        await self.publish_about(event, about)

    async def publish_about(self, event: ServerEvent, indexes: Collection[str] | None) -> None:
        """`event` to each stream whose reader may read one of `indexes` (None: every stream)."""
        for listener, reader in list(self._listeners.values()):
            if indexes is not None and not any(self._acl.may_read(reader, name) for name in indexes):
                continue
            try:
                listener(event)
            except Exception:  # fan-out boundary, as the SDK's bus: one stream must not starve the others
                log.exception("subscription listener raised; continuing")
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = (listener, current_reader())  # the stream's caller: the listen request's

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


class ResourceFeed:
    """One per replica: the subscription bus its MCP servers share, the status watch that publishes
    on it, and the MCP middleware that lists each index's status, types a file by its language and
    holds the watch for each subscription stream (at most `max_streams` at once). The watch reads
    every index; each stream hears only of those its caller may read (`acl`: `index.acl`; None: no
    entry, every index open)."""

    def __init__(
        self,
        service: CodeSearchService,
        period_s: float = STATUS_POLL_S,
        max_streams: int = MAX_LISTEN_STREAMS,
        acl: IndexAcl | None = None,
    ) -> None:
        self.bus = ReaderBus(acl if acl is not None else IndexAcl({}, LimitsSettings()))
        # the watch is shared by the streams of several callers: it reads every index, the bus filters
        self.watch = StatusWatch(lambda: service.index_summaries(reader=UNRESTRICTED_READER), self._publish, period_s)
        self._service = service
        self._max_streams = max_streams
        self.streams = 0

    async def _publish(self, changes: ResourceChanges) -> None:
        """Each change to the streams whose caller may read an index it concerns: the list of indexes
        when one of them moved, an index's status when it did, the list's membership when one of them
        came or went."""
        if changes.moved:
            await self.bus.publish_about(ResourceUpdated(uri=INDEXES_URI), changes.moved)
        for name in changes.moved:
            await self.bus.publish_about(ResourceUpdated(uri=status_uri(name)), [name])
        if changes.came_or_went:
            await self.bus.publish_about(ResourcesListChanged(), changes.came_or_went)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "subscriptions/listen":
            return await self._listen(ctx, call_next)
        result = await call_next(ctx)
        if ctx.method == "resources/list" and isinstance(result, dict):
            return {**result, "resources": [*result.get("resources", []), *await self._status_resources()]}
        if ctx.method == "resources/read" and isinstance(result, dict):
            return {**result, "contents": [_typed(content) for content in result.get("contents", [])]}
        return result

    async def _listen(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if self.streams >= self._max_streams:
            raise MCPError(INTERNAL_ERROR, f"subscription limit reached ({self._max_streams} on this replica)")
        self.streams += 1
        try:
            async with self.watch.watching():
                return await call_next(ctx)
        finally:
            self.streams -= 1

    async def _status_resources(self) -> list[dict[str, Any]]:
        """A status resource per index (none when the index actor cannot say which there are)."""
        try:
            summaries = await self._service.index_summaries()
        except (SamespaceError, RayError) as exc:
            log.warning("resources/list without the indexes' status: %r", exc)
            return []
        return [
            Resource(
                uri=summary.status_uri,
                name=f"{summary.name}/status",
                title=f"{summary.name}: index status",
                description=f"Index {summary.name}: its build, source, staleness and builds (subscribable).",
                mime_type=JSON_MIME,
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
            for summary in summaries
        ]


def _typed(content: dict[str, Any]) -> dict[str, Any]:
    """A file's contents with the MIME type of its language (the file template declares text/plain)."""
    try:
        ref = parse_resource_uri(str(content.get("uri", "")))
    except SamespaceError:
        return content
    return {**content, "mimeType": mime_type_of(ref.path)} if isinstance(ref, FileRef) else content


def add_resources(mcp: MCPServer, service: CodeSearchService, feed: ResourceFeed) -> None:
    """The index list, each index's status and each indexed file as resources, subscriptions to their
    changes through `feed`, and completion of index names and file paths."""
    mcp.middleware.append(feed)

    @mcp.resource(
        INDEXES_URI,
        name="indexes",
        title="Indexes",
        description="Every index: its serving build, commit, counts and latest build, with the URI of its status.",
        mime_type=JSON_MIME,
    )
    async def indexes() -> str:
        return IndexList(indexes=await _resource_call(service.index_summaries())).model_dump_json(indent=2)

    @mcp.resource(
        STATUS_TEMPLATE,
        name="index_status",
        title="Index status",
        description="One index as index_status answers it (how stale, builds running). Subscribe to hear of a "
        "new build, a build starting, ending or failing.",
        mime_type=JSON_MIME,
    )
    async def index_status(name: str) -> str:
        return (await _resource_call(_status(service, name))).model_dump_json(indent=2)

    @mcp.resource(
        FILE_TEMPLATE,
        name="index_file",
        title="Indexed file",
        description="The text of a file an index holds (its path from the repository root; credentials redacted).",
        mime_type="text/plain",
    )
    async def index_file(name: str, path: str) -> str:
        return (await _resource_call(_file(service, name, path))).text

    @mcp.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        try:
            return await _completion(service, ref, argument, context)
        except (SamespaceError, RayError) as exc:
            log.info("no completion for %s: %r", argument.name, exc)
            return None


async def _status(service: CodeSearchService, name: str) -> IndexStatus:
    return status_of_index(await service.index_status(check_index_name(name)), name)


async def _file(service: CodeSearchService, name: str, path: str) -> SourceLines:
    return await service.read_file(check_index_name(name), check_file_path(name, path))


async def _resource_call(call: Any) -> Any:
    """Await a service call; a refusal (an unknown index, a path refused) is the resource not found,
    saying why; a cluster part down is a resource error that says so (never a traceback)."""
    try:
        return await call
    except SamespaceError as exc:
        raise ResourceNotFoundError(str(original_error(exc))) from exc
    except RayError as exc:
        raise ResourceError(cluster_unavailable(exc)) from exc


async def _completion(
    service: CodeSearchService,
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    """Index names for a template's `name` and a prompt's `repo`; for the file template's `path`, the
    paths of that index's files that start with (else contain) what was typed."""
    typed = argument.value
    if len(typed) > MAX_COMPLETION_CHARS:
        return None
    if argument.name in ("name", "repo"):
        names = [summary.name for summary in await service.index_summaries() if summary.name.startswith(typed)]
        return Completion(values=names[:MAX_COMPLETIONS], total=len(names), has_more=len(names) > MAX_COMPLETIONS)
    name = (context.arguments or {}).get("name") if context is not None else None
    if argument.name != "path" or not isinstance(ref, ResourceTemplateReference) or ref.uri != FILE_TEMPLATE:
        return None
    if not name or not typed:
        return None
    found = await service.search_files(typed, check_index_name(name), MAX_COMPLETIONS)
    paths = sorted({hit.path for hit in found.files}, key=lambda path: (not path.startswith(typed), path))
    return Completion(values=paths, total=len(paths), has_more=False)
