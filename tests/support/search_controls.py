"""What the search-controls tests index: a small repository with code, tests in seven languages'
conventions, a Rust `#[cfg(test)]` module and docs, built into a real catalogue as a reindex writes it
(random vectors, real keyword terms), or as a build from before rows carried their categories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cluster.build import collect_repository
from cluster.index import CATEGORIES_FIELD, IndexCatalog, VectorStore, chunk_point, embed_hash
from cluster.ingest import SourceState
from cluster.settings import SamespaceSettings
from cluster.types import StoredPoint
from tests.support.code_maps import IDENTITY, WIDTH

_METHODS = ("total", "subtotal", "tax", "discount", "shipping", "balance", "refund_total", "due", "paid", "owed")
BILLING = (
    '"""Billing."""\n\nRATE = 3\n\n\nclass Invoice:\n    def __init__(self, lines):\n        self.lines = lines\n'
    + "".join(
        f"\n    def {name}(self):\n        amount = sum(line.amount for line in self.lines)\n"
        f"        amount = amount * RATE\n        return amount  # {name}\n"
        for name in _METHODS
    )
    + "\n\ndef charge_card(card, amount):\n    return card.charge(amount)\n"
)  # Invoice is longer than a window: its methods are chunks of their own
LIB_RS = """pub fn parse_amount(text: &str) -> u64 {
    text.trim().parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_amount() {
        assert_eq!(parse_amount(" 3 "), 3);
    }
}
"""
FILES = {
    "src/billing.py": BILLING,
    "src/lib.rs": LIB_RS,
    "tests/test_billing.py": "def test_charge_card():\n    assert charge_card(None, 0) is None\n",
    "conftest.py": "import pytest\n\n\n@pytest.fixture\ndef card():\n    return object()\n",
    "pkg/amount.go": "package pkg\n\nfunc ParseAmount(s string) int {\n\treturn len(s)\n}\n",
    "pkg/amount_test.go": 'package pkg\n\nfunc TestParseAmount(t *testing.T) {\n\tParseAmount("3")\n}\n',
    "web/cart.ts": "export function addToCart(cart: string[], item: string) {\n  cart.push(item);\n}\n",
    "web/cart.test.ts": "test('adds to the cart', () => {\n  addToCart([], 'x');\n});\n",
    "src/test/java/BillingTest.java": "class BillingTest {\n    @Test\n    void charges() {\n    }\n}\n",
    "spec/invoice_spec.rb": "describe Invoice do\n  it 'totals the lines' do\n  end\nend\n",
    "docs/billing.md": "# Billing\n\nHow an invoice is charged to a card.\n",
}
TEST_FILES = {
    "tests/test_billing.py",
    "conftest.py",
    "pkg/amount_test.go",
    "web/cart.test.ts",
    "src/test/java/BillingTest.java",
    "spec/invoice_spec.rb",
}
SETTINGS = SamespaceSettings()


def write_tree(root: Path, files: dict[str, str] = FILES) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def build(catalog: IndexCatalog, name: str, root: Path, *, categorised: bool = True, seed: int = 7) -> str:
    """Index `root` as a reindex does; `categorised=False` writes rows without their `categories`, as a
    build from before them did (its record is made old by `forget_categories`)."""
    found = collect_repository(root, SETTINGS)
    source = SourceState(vcs="git", commit="c0ffee" * 6 + "abcd", branch="main", dirty=False)
    build_id = catalog.begin_build(name, IDENTITY, str(root), None, source=source)
    rng = np.random.default_rng(seed)
    points: list[StoredPoint] = []
    for chunk in found.chunks:
        code, names = (v / np.linalg.norm(v) for v in rng.normal(size=(2, WIDTH)))
        written_by = ("p0", IDENTITY)
        point = chunk_point(
            name, build_id, IDENTITY, chunk, (code, names), written_by, file_hash=None, hashed=embed_hash(chunk)
        )
        if not categorised:
            payload = {key: value for key, value in point.payload.items() if key != CATEGORIES_FIELD}
            point = point.model_copy(update={"payload": payload})
        points.append(point)
    catalog.write(build_id, points)
    catalog.commit_build(build_id, files=found.files, providers=["p0"])
    return build_id


def forget_categories(store: VectorStore, build_id: str) -> None:
    """Make a committed build's record one the version before wrote (no `categorised`): a catalogue
    opened afterwards reads it as a build whose rows lack their categories."""
    meta = store.get_metadata(build_id)
    assert meta is not None
    record: dict[str, Any] = dict(meta["record"])
    del record["categorised"]
    store.put_metadata(build_id, {**meta, "record": record})
