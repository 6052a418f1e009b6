"""The second text embedded for every chunk: its name, owner and signature (chunk text version 3).

A docstring-style query ("Return the response's text encoding") is close to a function's name
(`Response.encoding`) in a way the code body often is not: the body is mostly statements, and
MiniLM sees only its first 256 tokens. Each chunk therefore carries two dense vectors in the same
encoder space, the code vector (`cluster.space.embedding_text`) and the name vector below; the
search fuses both cosines with the keyword leg (`cluster.index.fusion`). On the dev packages of
`bench.quality` the name vector alone is weaker than the code vector (recall@10 0.671 vs 0.746)
and the two together are stronger than either.
"""

from __future__ import annotations

from cluster.index.tokens import identifier_tokens
from cluster.space import signature_line
from cluster.types import Chunk

__all__ = ["name_text"]


def name_text(chunk: Chunk) -> str:
    """`words of the name ; of words of the owner ; signature line`, e.g. for `Client.send_request`:
    "send request ; of client ; def send_request(self, request, *, stream=False):". A chunk without
    a symbol (module code, a window, a section without a title) is named by the words of its path."""
    if not chunk.symbol:
        return " ".join(identifier_tokens(chunk.path))
    owner, _, short = chunk.symbol.rpartition(".") if chunk.kind != "section" else ("", "", chunk.symbol)
    parts = [" ".join(identifier_tokens(short)) or short]
    if owner:
        parts.append("of " + " ".join(identifier_tokens(owner)))
    signature = signature_line(chunk.text, short)
    if signature:
        parts.append(signature)
    return " ; ".join(parts)
