"""Who may read an index (`index.acl`): an index name or glob mapped to readers, 'group:<name>' (a
group of the caller's token) or 'sub:<subject>' (the caller's subject).

Which entry speaks for an index: its exact name's entry, else the most specific glob that matches it
(the most literal characters, `cluster.index.globs.literal_chars`; a tie goes to the entry written
first); an index no entry matches is open to every reader. An unrestricted reader (no identity under
auth.mode none or token, a samespace:admin token) reads every index.

An index a caller may not read does not exist for that caller: scopes resolve to the readable
indexes only (`cluster.index.scope`), and every `IndexNotFound` lists only readable names
(`hiding`), so the answer to a name the caller may not read is the answer to an unknown name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from cluster.auth import ANONYMOUS, Reader
from cluster.errors import IndexNotFound
from cluster.index.globs import Glob, compile_glob, is_glob, literal_chars
from cluster.settings import LimitsSettings

__all__ = ["ANONYMOUS_READER", "UNRESTRICTED_READER", "IndexAcl", "ReadableFilter"]

# What `cluster.auth.current_reader()` is outside any request: no group, not unrestricted (fail closed).
ANONYMOUS_READER = Reader(subject=ANONYMOUS.subject)
# Every index: the admin API (samespace:admin) and a replica's own reads on behalf of several callers
# (the resource feed's status watch, filtered per subscriber afterwards).
UNRESTRICTED_READER = Reader(subject="samespace", unrestricted=True)

ReadableFilter = Callable[[Sequence[str]], list[str]]  # index names → those a reader may read, in order


@dataclass(frozen=True)
class _GlobEntry:
    glob: Glob
    literals: int
    order: int
    readers: frozenset[str]


class IndexAcl:
    """`index.acl`, its globs compiled once (under the `limits` caps: LimitExceeded names the setting)."""

    def __init__(self, acl: Mapping[str, Sequence[str]], limits: LimitsSettings) -> None:
        self._exact: dict[str, frozenset[str]] = {}
        globs: list[_GlobEntry] = []
        for order, (pattern, readers) in enumerate(acl.items()):
            if is_glob(pattern):
                glob = compile_glob(pattern, limits, "index.acl")
                globs.append(_GlobEntry(glob, literal_chars(pattern), order, frozenset(readers)))
            else:
                self._exact[pattern] = frozenset(readers)
        self._globs = sorted(globs, key=lambda entry: (-entry.literals, entry.order))  # most specific first

    @property
    def empty(self) -> bool:
        """No entry: every index is open to every reader."""
        return not self._exact and not self._globs

    def readers_of(self, name: str) -> frozenset[str] | None:
        """The readers of the entry that speaks for `name` (None: no entry, open to every reader)."""
        exact = self._exact.get(name)
        if exact is not None:
            return exact
        for entry in self._globs:
            if entry.glob.matches(name):
                return entry.readers
        return None

    def may_read(self, reader: Reader, name: str) -> bool:
        if reader.unrestricted:
            return True
        allowed = self.readers_of(name)
        if allowed is None:
            return True
        return f"sub:{reader.subject}" in allowed or any(f"group:{group}" in allowed for group in reader.groups)

    def readable(self, reader: Reader, names: Sequence[str]) -> list[str]:
        """The names `reader` may read, in their order."""
        if reader.unrestricted or self.empty:
            return list(names)
        return [name for name in names if self.may_read(reader, name)]

    def filter_for(self, reader: Reader) -> ReadableFilter:
        """`readable` for one reader (what `cluster.index.resolve_scope` takes)."""
        return lambda names: self.readable(reader, names)

    @contextmanager
    def hiding(self, reader: Reader) -> Iterator[None]:
        """Run a read for `reader`: an `IndexNotFound` raised inside lists only the names it may read,
        so an unknown name and a name it may not read get the same answer."""
        try:
            yield
        except IndexNotFound as exc:
            raise IndexNotFound(exc.name, self.readable(reader, exc.known)) from None
