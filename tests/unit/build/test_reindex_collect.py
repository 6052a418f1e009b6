"""The reindex's walk-and-chunk step on hostile input, and its refusal to shrink an index by accident.

Plain Python (no Ray): `cluster.build`'s collect and shrink-check stages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cluster.build.collect as collect
from cluster.build import RepoChunks, check_shrink, collect_repository, report_skips
from cluster.errors import ScanError, ShrinkRefused
from cluster.index.records import IndexRecord
from cluster.ingest.skips import SkipReason
from cluster.settings import SamespaceSettings
from cluster.space import EncoderIdentity

IDENTITY = EncoderIdentity(model="m", weights_sha256="a" * 64, width=384, max_seq_length=256)
# Built at run time so this file never holds a literal credential (the repository indexes itself).
AWS_KEY = "AKIA" + "Q3EXAMPLE7" + "TESTKEY1"  # 20 chars, the access-key-id shape
PEM = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + "x" * 60 + "\n-----END RSA " + "PRIVATE KEY-----"


def serving(files: int) -> IndexRecord:
    return IndexRecord(
        name="r", build="r__b1", repo_root="/r", identity=IDENTITY, files=files, chunks=files, started_at=0.0
    )


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_chunk_holding_a_credential_is_dropped_and_its_clean_neighbours_kept(tmp_path: Path) -> None:
    clean = "def add(a, b):\n    return a + b\n"
    leaky = f'def connect():\n    key = "{AWS_KEY}"\n    return key\n'
    repo = write(tmp_path / "repo", {"app.py": clean + "\n\n" + leaky, "ok.py": clean})
    lines: list[str] = []
    found = collect_repository(repo, SamespaceSettings(), lines.append)
    texts = "\n".join(c.text for c in found.chunks)
    assert AWS_KEY not in texts
    assert "def add" in texts and found.paths == ["app.py", "ok.py"]
    assert found.skipped.counts == {SkipReason.SECRET_CONTENT.value: 1}
    assert found.skipped.paths[SkipReason.SECRET_CONTENT.value] == ["app.py"]
    assert not any(AWS_KEY in line for line in lines)


def test_a_file_whose_every_chunk_holds_a_secret_is_not_an_indexed_file(tmp_path: Path) -> None:
    repo = write(tmp_path / "repo", {"keys.txt": PEM + "\n", "main.py": "print('hi')\n"})
    found = collect_repository(repo, SamespaceSettings())
    assert found.paths == ["main.py"]
    assert found.skipped.counts[SkipReason.SECRET_CONTENT.value] >= 1


def test_one_file_the_chunker_cannot_handle_is_skipped_and_the_walk_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = write(
        tmp_path / "repo",
        {"a.py": "def a():\n    pass\n", "b.py": "def b():\n    pass\n", "c.py": "def c():\n    pass\n"},
    )
    real = collect.chunk_file

    def fragile(path: str, text: str, settings: object) -> object:
        if path == "b.py":
            raise RecursionError("maximum recursion depth exceeded")
        return real(path, text, settings)  # type: ignore[arg-type]

    monkeypatch.setattr(collect, "chunk_file", fragile)
    lines: list[str] = []
    found = collect_repository(repo, SamespaceSettings(), lines.append)
    assert found.paths == ["a.py", "c.py"]
    assert found.skipped.counts == {SkipReason.CHUNK_FAILED.value: 1}
    assert any("b.py" in line and "RecursionError" in line for line in lines)


def test_secret_files_and_generated_files_are_reported_by_reason_with_paths(tmp_path: Path) -> None:
    bundle = ";".join(f"function f{i}(a){{return a+{i}}}" for i in range(2000))
    repo = write(
        tmp_path / "repo",
        {
            ".env": "OPENROUTER_API_KEY=whatever\n",
            "deploy/server.pem": PEM + "\n",
            "web/app.min.js": bundle + "\n",
            "src/main.py": "def main():\n    return 0\n",
        },
    )
    found = collect_repository(repo, SamespaceSettings())
    assert found.paths == ["src/main.py"]
    counts = found.skipped.counts
    assert counts[SkipReason.SECRET_FILE.value] == 2
    assert sorted(found.skipped.paths[SkipReason.SECRET_FILE.value]) == [".env", "deploy/server.pem"]
    assert found.skipped.paths[SkipReason.GENERATED.value] == ["web/app.min.js"]
    lines: list[str] = []
    report_skips(found.skipped, lines.append)
    assert lines[0].startswith("skipped: ") and "secret-file 2" in lines[0]
    assert "whatever" not in "\n".join(lines)


def test_a_root_that_cannot_be_scanned_is_an_error_not_an_empty_repository(tmp_path: Path) -> None:
    with pytest.raises(ScanError):
        collect_repository(tmp_path / "not-mounted", SamespaceSettings())


@pytest.mark.parametrize(
    ("serving_files", "new_files", "share", "refused"),
    [
        (10, 0, 0.5, True),  # an empty walk never replaces a good index
        (10, 0, 1.0, True),  # ... whatever share is allowed
        (10, 4, 0.5, True),  # 60 % of the files gone
        (10, 5, 0.5, False),  # exactly the allowed share
        (10, 9, 0.0, True),  # share 0: any drop is refused
        (10, 12, 0.5, False),  # growing is always fine
        (0, 0, 0.5, False),  # nothing served yet: nothing to protect
    ],
)
def test_a_build_that_drops_too_many_files_is_refused(
    serving_files: int, new_files: int, share: float, refused: bool
) -> None:
    from cluster.types import Chunk

    chunks = [
        Chunk(path=f"f{i}.py", start_line=1, end_line=1, language="python", symbol=None, kind="module", text="x = 1")
        for i in range(new_files)
    ]
    found = RepoChunks(chunks, list(range(new_files)), [c.path for c in chunks], ["h"] * new_files)
    if refused:
        with pytest.raises(ShrinkRefused) as caught:
            check_shrink("r", serving(serving_files), found, share)
        assert "--allow-shrink" in str(caught.value) and f"to {new_files} files" in str(caught.value)
    else:
        check_shrink("r", serving(serving_files), found, share)


def test_no_serving_index_means_no_shrink_check() -> None:
    check_shrink("r", None, RepoChunks([], [], [], []), 0.5)
