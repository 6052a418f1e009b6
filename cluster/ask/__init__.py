"""The ask loop: the pipeline, the RLM loop, its plan and tools, and the evidence it cites."""

from __future__ import annotations

from cluster.ask.evidence import EvidenceBlock, citations_in
from cluster.ask.pipeline import AskPipeline, AskRequest, AskResult
from cluster.ask.rlm import ChatOutcome

__all__ = [
    "AskPipeline",
    "AskRequest",
    "AskResult",
    "ChatOutcome",
    "EvidenceBlock",
    "citations_in",
]
