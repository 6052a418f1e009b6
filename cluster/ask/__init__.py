"""The ask loop: the pipeline, the RLM loop, its plan and tools, the evidence it cites, and its progress."""

from __future__ import annotations

from cluster.ask.ask_progress import AskProgress, ProgressCallback
from cluster.ask.evidence import EvidenceBlock, citations_in
from cluster.ask.pipeline import AskPipeline, AskRequest, AskResult
from cluster.ask.rlm import ChatOutcome

__all__ = [
    "AskPipeline",
    "AskProgress",
    "AskRequest",
    "AskResult",
    "ChatOutcome",
    "EvidenceBlock",
    "ProgressCallback",
    "citations_in",
]
