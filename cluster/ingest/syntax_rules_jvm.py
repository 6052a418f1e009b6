"""Which syntax nodes become chunks in the languages of this group (see `cluster.ingest.syntax_rules`)."""

from __future__ import annotations

from collections.abc import Mapping

from cluster.ingest.syntax_rules import SyntaxRules

RULES: Mapping[str, SyntaxRules] = {}
