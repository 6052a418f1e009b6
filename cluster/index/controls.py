"""search_code's `exclude`, `kind` and `tests` as one store filter, so every leg of the search is
narrowed inside the store (a filter after the top k would leave fewer than k hits).

Each row stores its categories at index time (`RowPayload.categories`, from
`cluster.ingest.chunk_categories`): `kind` keeps rows holding one of the kinds asked, `tests` keeps
or leaves out rows holding "test". Globs have no match in the store, so the caller expands each
`exclude` glob into the paths it matches among the indexed files (`cluster.index.path_selector`).

Rows written before `categories` existed lack the key; their build's record says so
(`IndexRecord.categorised` False). For such builds the filter adds, as alternatives, what those rows
do carry: the test rule on their paths (`is_test_path`, listed by the caller: test code by its path
only, no Rust test attribute), and each kind by the chunk kind and language the category is made
of. Each alternative implies the category on a newer row too (same rule, same fields), so adding it
never lets a newer row through that its categories would refuse. The next reindex rewrites such
rows with their categories (`PAYLOAD_FIELDS`) and the fallback goes unused.
"""

from __future__ import annotations

from collections.abc import Collection

from cluster.index.payload import CATEGORIES_FIELD
from cluster.ingest import CLASS_KINDS, DOC_LANGUAGES, MODULE_KINDS, TEST, Category, SearchControls
from cluster.types import PayloadFilter

__all__ = ["controls_filter"]

_DOC = sorted(DOC_LANGUAGES)
_BY_ROW_FIELDS: dict[Category, PayloadFilter] = {  # a category from the fields every row has
    "function": PayloadFilter(any_of={"kind": ["function"]}, none_of={"language": _DOC}),
    "method": PayloadFilter(any_of={"kind": ["method"]}, none_of={"language": _DOC}),
    "class": PayloadFilter(any_of={"kind": sorted(CLASS_KINDS)}, none_of={"language": _DOC}),
    "module": PayloadFilter(any_of={"kind": sorted(MODULE_KINDS)}, none_of={"language": _DOC}),
    "doc": PayloadFilter(any_of={"language": _DOC}),
}


def controls_filter(
    controls: SearchControls, excluded: Collection[str], old_tests: Collection[str] | None
) -> PayloadFilter | None:
    """The store filter of `controls` (None: nothing left out).

    `excluded`: the indexed paths an `exclude` glob matches. `old_tests`: None when every build
    searched is categorised; else the paths of the other builds that `is_test_path` names."""
    none_of: dict[str, list[str]] = {}
    groups: list[list[PayloadFilter]] = []
    tests = sorted(old_tests or ())
    if excluded:
        none_of["path"] = sorted(excluded)
    if controls.tests == "exclude":
        none_of[CATEGORIES_FIELD] = [TEST]
        if tests:
            none_of["path"] = sorted({*none_of.get("path", []), *tests})
    elif controls.tests == "only":
        groups.append(_categories_or_fallback([TEST], tests, old_tests is not None))
    if controls.kind:
        groups.append(_categories_or_fallback(controls.kind, tests, old_tests is not None))
    if not none_of and not groups:
        return None
    return PayloadFilter(none_of=none_of, either=groups)


def _categories_or_fallback(kinds: list[Category], tests: list[str], fallback: bool) -> list[PayloadFilter]:
    """Rows of one of `kinds`: by their categories, and with `fallback` by what older rows carry."""
    members = [PayloadFilter(any_of={CATEGORIES_FIELD: list(kinds)})]
    if fallback:
        members += [_BY_ROW_FIELDS[kind] for kind in kinds if kind != TEST]
        if TEST in kinds:
            members.append(PayloadFilter(any_of={"path": tests}))  # an empty list: no older row is a test
    return members
