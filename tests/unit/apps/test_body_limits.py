"""`POST /rlm/ask` reads its body as a capped stream: past `limits.max_ask_body_bytes` it answers 413
naming the setting, without reading the rest and without asking anything; under it, the body is the
same `AskRequest` as before (422 naming the bad fields). On the real app, without Ray."""

from __future__ import annotations

import json
from typing import Any, cast

from cluster.ask.ask_progress import ProgressCallback
from cluster.ask.pipeline import AskRequest, AskResult, AskTrace
from cluster.settings import SamespaceSettings
from serve_apps.mcp import AskService
from tests.support.fakes.asgi import drive

CAP = 4096
SETTING = "limits.max_ask_body_bytes (SAMESPACE_LIMITS__MAX_ASK_BODY_BYTES)"
JSON = (b"content-type", b"application/json")


class CountingAsker:
    def __init__(self) -> None:
        self.asked: list[AskRequest] = []

    async def ask(self, request: AskRequest, progress: ProgressCallback | None = None) -> AskResult:
        self.asked.append(request)
        return AskResult(
            question=request.question, answer="a", citations=[], produced=AskTrace(mode="draft", deep=request.deep)
        )


def ask_app(asker: CountingAsker) -> Any:
    from serve_apps.mcp import build_asgi_app

    settings = SamespaceSettings(limits={"max_ask_body_bytes": CAP})
    return build_asgi_app(cast(Any, None), cast(AskService, asker), settings)


def test_an_ask_body_over_the_cap_is_413_naming_the_setting_and_the_rest_is_never_read() -> None:
    asker = CountingAsker()
    chunks = [b'{"question": "' + b"x" * 1000] + [b"x" * 1024] * 200  # ~200 KB, streamed without a length
    answer = drive(ask_app(asker), "/rlm/ask", chunks, headers=[JSON])
    assert answer.status == 413
    assert SETTING in json.loads(answer.body)["detail"]
    assert answer.chunks_read <= 5  # 4 KiB read, the other ~196 KiB left unread
    assert asker.asked == []


def test_a_declared_length_over_the_cap_is_refused_before_a_byte_is_read() -> None:
    asker = CountingAsker()
    length = (b"content-length", str(CAP + 1).encode())
    answer = drive(ask_app(asker), "/rlm/ask", [b"x" * (CAP + 1)], headers=[JSON, length])
    assert (answer.status, answer.chunks_read, asker.asked) == (413, 0, [])


def test_an_ask_body_under_the_cap_is_answered_and_a_bad_one_is_422_naming_the_fields() -> None:
    asker = CountingAsker()
    body = json.dumps({"question": "where is the fee computed?", "repo": "shop"}).encode()
    answer = drive(ask_app(asker), "/rlm/ask", [body[:10], body[10:]], headers=[JSON])
    assert answer.status == 200 and json.loads(answer.body)["question"] == "where is the fee computed?"
    assert asker.asked == [AskRequest(question="where is the fee computed?", repo="shop")]
    bad = drive(ask_app(asker), "/rlm/ask", [json.dumps({"question": "", "deep": "maybe"}).encode()], headers=[JSON])
    assert bad.status == 422
    assert {tuple(e["loc"]) for e in json.loads(bad.body)["detail"]} == {("body", "question"), ("body", "deep")}
    assert b"maybe" not in bad.body  # the input is never echoed
    assert drive(ask_app(asker), "/rlm/ask", [b"{not json"], headers=[JSON]).status == 422
    assert len(asker.asked) == 1


def test_an_ask_whose_repo_is_over_the_glob_caps_is_422_naming_the_setting_before_anything_is_asked() -> None:
    from cluster.search import CodeSearchService
    from serve_apps.mcp import build_asgi_app

    settings = SamespaceSettings()
    never = cast(Any, None)  # neither the index nor a dispatcher may be reached
    asker = AskService(CodeSearchService(never, never, never, rerank_candidates=10), settings, never, never)
    app = build_asgi_app(never, asker, settings)
    body = json.dumps({"question": "where is the fee computed?", "repo": "*a" * 17}).encode()
    answer = drive(app, "/rlm/ask", [body], headers=[JSON])
    assert answer.status == 422
    assert "limits.max_glob_wildcards (SAMESPACE_LIMITS__MAX_GLOB_WILDCARDS)" in json.loads(answer.body)["detail"]
