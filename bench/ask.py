"""The ask path with and without the query-vector cache, same run, same index, same script.

    python -m bench.ask [--repo PATH] [--rounds 3]

A local Ray indexes the repository; the ask pipeline runs in this process over the real actors
(index, code-embedding dispatcher, embedder) with a scripted RLM that behaves as tool-calling
models do: its plan searches the question itself plus a shorter phrase, and its follow-up round
repeats both searches. The baseline is the same pipeline whose cache never hits (TTL ~0), i.e.
every search encodes its text. Reported: query encodes per ask (counted at the embedder actor)
and ask latency; results in bench/results/ask.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster.environment import set_local_env_defaults

set_local_env_defaults()

from bench.run import QUERIES, RESULTS, ROOT, latency_summary  # noqa: E402


def phrase(question: str) -> str:
    return " ".join(question.split()[:4])


class ScriptedRlm:
    """Plan: the question and a phrase of it; round 1: both again; last round: a draft."""

    async def complete(self, request: dict[str, Any], timeout_s: float) -> Any:
        from cluster.ask.rlm import ChatOutcome
        from cluster.cloud import ChatResult, ToolCall

        messages = request["messages"]
        if "tools" not in request:
            question = messages[-1]["content"]
            plan = {
                "subQuestions": [
                    {"tool": "search_code", "query": question[:80]},
                    {"tool": "search_code", "query": phrase(question)},
                ]
            }
            return ChatOutcome(ChatResult(content=json.dumps(plan)), "scripted-rlm")
        if request.get("tool_choice") == "none":
            return ChatOutcome(ChatResult(content="draft"), "scripted-rlm")
        question = messages[1]["content"].split("\n", 1)[0].removeprefix("Question: ")
        calls = [
            ToolCall(id=f"r{i}", name="search_code", arguments=json.dumps({"query": q}))
            for i, q in enumerate([question[:80], phrase(question)])
        ]
        return ChatOutcome(ChatResult(tool_calls=calls), "scripted-rlm")

    async def context_window(self) -> int | None:
        return 32768


class CitingAssistant:
    async def complete(self, request: dict[str, Any], timeout_s: float) -> Any:
        from cluster.ask.evidence import citations_in
        from cluster.ask.rlm import ChatOutcome
        from cluster.cloud import ChatResult

        spans = citations_in(request["messages"][-1]["content"])[:2]
        text = "See " + ", ".join(f"{s.path}:{s.start_line}-{s.end_line}" for s in spans)
        return ChatOutcome(ChatResult(content=text), "scripted-assistant")

    async def context_window(self) -> int | None:
        return 32768


async def run_asks(service: Any, settings: Any, questions: list[str], embedder: Any) -> dict[str, Any]:
    from cluster.ask.pipeline import AskPipeline, AskRequest
    from serve_apps.mcp import RepoTools

    samples: list[float] = []
    encodes = 0
    for question in questions:
        texts = {question, question[:80], phrase(question)}
        before = sum([await embedder.encode_count.remote(t) for t in texts])
        pipeline = AskPipeline(RepoTools(service, None), ScriptedRlm(), CitingAssistant(), settings.rlm, time.monotonic)
        started = time.perf_counter()
        result = await pipeline.ask(AskRequest(question=question))
        samples.append(time.perf_counter() - started)
        assert result.produced.mode == "synthesis", result.produced
        encodes += sum([await embedder.encode_count.remote(t) for t in texts]) - before
    return {"latency": latency_summary(samples), "encodes_per_ask": round(encodes / len(questions), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ask")
    parser.add_argument("--repo", type=Path, default=ROOT)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the question list per side")
    args = parser.parse_args(argv)

    import ray

    from actors import get_index_actor
    from actors.build_ports import run_reindex
    from actors.dispatcher import get_dispatcher
    from actors.query_path import QueryPath
    from actors.search_ports import IndexActorPort, RerankerPort
    from cluster.roles import Role
    from cluster.search import CodeSearchService
    from cluster.search.query_cache import QueryVectorCache
    from cluster.settings import SamespaceSettings

    work = Path(tempfile.mkdtemp(prefix="samespace-bench-ask-"))
    settings = SamespaceSettings(store={"data_dir": work / "data"}, ray={"address": "local", "namespace": "bench-ask"})
    ray.init(address="local", namespace="bench-ask", include_dashboard=False, log_to_driver=False)
    try:
        run_reindex(settings, args.repo.resolve(), "bench", emit=lambda line: None)
        index = IndexActorPort(get_index_actor(settings))
        encoder = QueryPath(get_dispatcher(settings, Role.CODE_EMBEDDING))
        reranker = RerankerPort(get_dispatcher(settings, Role.RERANKER))
        embedder = ray.get_actor("samespace-embedder-cpu0", namespace="bench-ask")

        def service(ttl_s: float) -> CodeSearchService:
            cache: QueryVectorCache[Any] = QueryVectorCache(ttl_s=ttl_s, max_entries=500, clock=time.monotonic)
            return CodeSearchService(index, encoder, reranker, settings.reranker.candidates, cache)

        async def measure() -> dict[str, Any]:
            await run_asks(service(600.0), settings, QUERIES[:2], embedder)  # warm-up: actors, discovery
            results: dict[str, list[dict[str, Any]]] = {"cached": [], "uncached": []}
            for n in range(args.rounds):  # alternate sides; fresh caches; distinct texts per pass
                questions = [f"{q} ({n})" for q in QUERIES]
                results["cached"].append(await run_asks(service(600.0), settings, questions, embedder))
                questions = [f"{q} [{n}]" for q in QUERIES]
                results["uncached"].append(await run_asks(service(1e-9), settings, questions, embedder))
            return {
                side: {
                    "encodes_per_ask": rows[-1]["encodes_per_ask"],
                    "p50_ms": sorted(r["latency"]["p50_ms"] for r in rows)[len(rows) // 2],
                    "runs": rows,
                }
                for side, rows in results.items()
            }

        report = asyncio.run(measure())
    finally:
        ray.shutdown()
    cached, uncached = report["cached"], report["uncached"]
    report["ratio_p50_cached_over_uncached"] = round(cached["p50_ms"] / uncached["p50_ms"], 3)
    print(f"encodes per ask: cached {cached['encodes_per_ask']} vs uncached {uncached['encodes_per_ask']}")
    print(
        f"ask p50: cached {cached['p50_ms']} ms vs uncached {uncached['p50_ms']} ms "
        f"(ratio {report['ratio_p50_cached_over_uncached']})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ask.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
