"""The resources' addresses: each URI the server builds parses back to what it named, and a path from
a client is refused unless it is a canonical path inside the repository, however it is encoded."""

from __future__ import annotations

import pytest

from cluster.errors import ReadRefused, SamespaceError
from cluster.ingest import KNOWN_LANGUAGES
from cluster.search import (
    INDEXES_URI,
    FileRef,
    check_file_path,
    file_uri,
    mime_type_of,
    parse_resource_uri,
    status_uri,
)
from cluster.search.resource_uris import MIME_TYPES, IndexesRef, StatusRef


@pytest.mark.parametrize(
    "path", ["src/tax.py", "README.md", "a b/c#d?.py", "docs/%41.md", "ünï/cödé.rs", ".github/workflows/ci.yml"]
)
def test_a_file_uri_parses_back_to_its_index_and_path(path: str) -> None:
    uri = file_uri("shop-2.x", path)
    assert uri.startswith("samespace://index/shop-2.x/file/")
    assert "#" not in uri.split("/file/", 1)[1] and "?" not in uri and " " not in uri
    assert parse_resource_uri(uri) == FileRef(name="shop-2.x", path=path)


def test_the_list_and_a_status_parse_to_what_they_name() -> None:
    assert parse_resource_uri(INDEXES_URI) == IndexesRef()
    assert status_uri("shop") == "samespace://index/shop/status"
    assert parse_resource_uri(status_uri("shop")) == StatusRef(name="shop")


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ("../secret.py", "'..'"),
        ("src/../../etc/passwd", "'..'"),
        ("%2e%2e/%2e%2e/etc/passwd", "'..'"),
        ("src/%2E%2E/%2E%2E/etc/passwd", "'..'"),
        ("..%2F..%2Fetc%2Fpasswd", "'..'"),
        ("/etc/passwd", "absolute"),
        ("%2Fetc%2Fpasswd", "absolute"),
        ("C:/Windows/win.ini", "absolute"),
        ("src\\..\\..\\etc\\passwd", "backslash"),
        ("src%5C..%5Cetc", "backslash"),
        ("src/tax.py%00.md", "control character"),
        ("src/%0atax.py", "control character"),
        ("src//tax.py", "canonical"),
        ("./src/tax.py", "canonical"),
        ("src/tax.py/", "canonical"),
        ("", "no path"),
        ("a" * 1001, "over 1000 characters"),
    ],
)
def test_a_path_that_leaves_the_repository_or_is_not_canonical_is_refused(tail: str, reason: str) -> None:
    with pytest.raises(ReadRefused) as refused:
        parse_resource_uri(f"samespace://index/shop/file/{tail}")
    assert reason in str(refused.value) and refused.value.repo == "shop"


def test_a_literal_percent_is_decoded_once_only() -> None:
    """%252e%252e decodes to the file name '%2e%2e' (no index holds it), never to '..'."""
    assert parse_resource_uri("samespace://index/shop/file/%252e%252e/x") == FileRef(name="shop", path="%2e%2e/x")


@pytest.mark.parametrize(
    "uri",
    [
        "samespace://index/shop",
        "samespace://index/shop/status/extra",
        "samespace://index/shop/files/a.py",
        "samespace://index/shop/status?x=1",
        "samespace://index/shop/file/a.py#top",
        "samespace://indexes/",
        "file:///etc/passwd",
        "samespace://index/%2e%2e/status",
        "samespace://index/sh%2Fop/status",
        "samespace://index/sh__bop/status",
        "samespace://index/-shop/status",
        "samespace://index/shop/file/%ff.py",
        "samespace://index/shop/file/" + "a/" * 1000,
    ],
)
def test_a_uri_that_names_nothing_served_is_refused(uri: str) -> None:
    with pytest.raises(SamespaceError):
        parse_resource_uri(uri)


def test_check_file_path_refuses_what_the_sdk_already_decoded() -> None:
    assert check_file_path("shop", "src/tax.py") == "src/tax.py"
    for bad in ("..", "src/..", "/abs", "a\x00b"):
        with pytest.raises(ReadRefused):
            check_file_path("shop", bad)


def test_every_known_language_has_a_mime_type_and_a_file_gets_its_own() -> None:
    assert set(MIME_TYPES) == set(KNOWN_LANGUAGES)
    assert [mime_type_of(p) for p in ("a/b.py", "README.md", "Makefile", "x.unknown", "c.json")] == [
        "text/x-python",
        "text/markdown",
        "text/x-makefile",
        "text/plain",
        "application/json",
    ]
