"""The addresses of the MCP resources, built and parsed here, and the MIME type a file is served with.

    samespace://indexes                        every index, its serving build and whether one is building
    samespace://index/{name}/status            one index's status (as the index_status tool answers it)
    samespace://index/{name}/file/{+path}      one indexed file's text (`path` keeps its slashes)

A resource URI comes from the client. Its name must be an index name (`cluster.index.records`) and
its path a canonical repository-relative path: no `..`, `.` or empty part, not absolute, no backslash,
no control character. The checks run on the path as decoded (percent-decoding happens once, so
`%2e%2e` is `..` and refused, and `%252e%252e` is a literal name that no index holds). A path that
passes reaches a file only through the read_code checks (`IndexActor.read_file`): a file the serving
build indexed, opened below the repository root with no symlink followed, never a deny-listed file.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import quote, unquote

from cluster.errors import ReadRefused, SamespaceError
from cluster.index import validate_index_name
from cluster.ingest import detect_language
from cluster.types import Strict

__all__ = [
    "FILE_TEMPLATE",
    "INDEXES_URI",
    "JSON_MIME",
    "MAX_RESOURCE_PATH_CHARS",
    "STATUS_TEMPLATE",
    "FileRef",
    "IndexesRef",
    "ResourceRef",
    "StatusRef",
    "check_file_path",
    "check_index_name",
    "file_uri",
    "mime_type_of",
    "parse_resource_uri",
    "status_uri",
]

SCHEME = "samespace://"
INDEXES_URI = "samespace://indexes"
INDEX_PREFIX = "samespace://index/"
STATUS_TEMPLATE = "samespace://index/{name}/status"
FILE_TEMPLATE = "samespace://index/{name}/file/{+path}"
JSON_MIME = "application/json"
MAX_RESOURCE_PATH_CHARS = 1000  # as read_code's and the history tools' path arguments
MAX_URI_CHARS = 2 * MAX_RESOURCE_PATH_CHARS
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")  # C:, as Windows would read it: never a relative path

# A file's MIME type by its language (`cluster.ingest.languages`); "text/plain" for what has none.
MIME_TYPES = {
    "python": "text/x-python",
    "go": "text/x-go",
    "javascript": "text/javascript",
    "typescript": "text/x-typescript",
    "tsx": "text/x-tsx",
    "rust": "text/x-rust",
    "java": "text/x-java",
    "c": "text/x-c",
    "cpp": "text/x-c++",
    "markdown": "text/markdown",
    "bash": "text/x-shellscript",
    "json": "application/json",
    "yaml": "application/yaml",
    "toml": "application/toml",
    "ini": "text/x-ini",
    "html": "text/html",
    "css": "text/css",
    "sql": "application/sql",
    "xml": "application/xml",
    "rst": "text/x-rst",
    "ruby": "text/x-ruby",
    "csharp": "text/x-csharp",
    "kotlin": "text/x-kotlin",
    "scala": "text/x-scala",
    "php": "text/x-php",
    "swift": "text/x-swift",
    "lua": "text/x-lua",
    "dockerfile": "text/x-dockerfile",
    "make": "text/x-makefile",
    "text": "text/plain",
}


class IndexesRef(Strict):
    kind: Literal["indexes"] = "indexes"


class StatusRef(Strict):
    kind: Literal["status"] = "status"
    name: str


class FileRef(Strict):
    kind: Literal["file"] = "file"
    name: str
    path: str


ResourceRef = IndexesRef | StatusRef | FileRef


def check_index_name(name: str) -> str:
    """`name` when it can name an index; SamespaceError (saying what a name is) otherwise."""
    return validate_index_name(name)


def check_file_path(name: str, path: str) -> str:
    """`path` when it is a canonical path relative to the repository root; ReadRefused, saying why,
    otherwise. Only the shape is checked here: whether the index holds the file is the reader's."""
    if not path:
        raise ReadRefused(name, path, "no path")
    if len(path) > MAX_RESOURCE_PATH_CHARS:
        raise ReadRefused(name, path[:80] + "…", f"a path over {MAX_RESOURCE_PATH_CHARS} characters")
    if _CONTROL.search(path):
        raise ReadRefused(name, path, "a control character in the path")
    if "\\" in path:
        raise ReadRefused(name, path, "a backslash in the path (parts are separated by '/')")
    if path.startswith("/") or _DRIVE.match(path):
        raise ReadRefused(name, path, "an absolute path (paths are relative to the repository root)")
    parts = path.split("/")
    if ".." in parts:
        raise ReadRefused(name, path, "path is outside the repository ('..')")
    if "" in parts or "." in parts:
        raise ReadRefused(name, path, "not a canonical path (an empty or '.' part)")
    return path


def status_uri(name: str) -> str:
    return f"{INDEX_PREFIX}{check_index_name(name)}/status"


def file_uri(name: str, path: str) -> str:
    """The file's URI, its path percent-encoded part by part (the slashes kept)."""
    return f"{INDEX_PREFIX}{check_index_name(name)}/file/{quote(check_file_path(name, path), safe='/')}"


def parse_resource_uri(uri: str) -> ResourceRef:
    """What a samespace resource URI names; SamespaceError (ReadRefused for a path) when it names
    nothing this server serves or its name or path is refused."""
    if len(uri) > MAX_URI_CHARS:
        raise SamespaceError(f"a resource URI over {MAX_URI_CHARS} characters")
    if uri == INDEXES_URI:
        return IndexesRef()
    if not uri.startswith(INDEX_PREFIX) or "?" in uri or "#" in uri:
        raise SamespaceError(f"not a samespace resource: {uri[:200]!r} (see resources/templates/list)")
    raw_name, _, rest = uri[len(INDEX_PREFIX) :].partition("/")
    name = check_index_name(_decoded(raw_name))
    if rest == "status":
        return StatusRef(name=name)
    if rest.startswith("file/"):
        return FileRef(name=name, path=check_file_path(name, _decoded(rest[len("file/") :])))
    raise SamespaceError(f"not a samespace resource: {uri[:200]!r} (an index has /status and /file/<path>)")


def mime_type_of(path: str) -> str:
    """The MIME type of a file by its language; text/plain for a language with none of its own."""
    return MIME_TYPES.get(detect_language(path), "text/plain")


def _decoded(text: str) -> str:
    """`text` percent-decoded once, as UTF-8; SamespaceError for bytes that are not UTF-8."""
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise SamespaceError(f"a percent-encoded part that is not UTF-8: {text[:200]!r}") from None
