"""Synthetic repositories for reindex tests and benchmarks: many small, distinct functions."""

from __future__ import annotations

from pathlib import Path

TOPICS = ["invoice", "shipment", "customer", "warehouse", "payment", "refund", "coupon", "catalog", "ledger", "tariff"]


def function_repo(root: Path, files: int, functions: int = 12) -> Path:
    """`files` Python files of `functions` small functions each: one chunk per function."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        topic = TOPICS[f % len(TOPICS)]
        body = "\n\n".join(
            f"def {topic}_{f}_step_{i}(record, limit={i}):\n"
            f'    """Step {i} of {topic} pipeline {f}: validate the {topic} record and clamp it."""\n'
            f"    value = record.get('{topic}_{f}_{i}', {i * f}) * {i + 2}\n"
            f"    return min(value, limit + {f})\n"
            for i in range(functions)
        )
        (root / f"{topic}_{f}.py").write_text(body + "\n")
    return root
