"""Reindex a repository into a new build and switch the index to it atomically.

    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \
        python -m jobs.reindex --repo /path/to/repo --name myrepo [--full] [--allow-shrink]

The driver: the arguments, the folder confined again (`--confined`), `ray.init`, then one call of
the pipeline (`cluster.build`, on the actors through `actors.build_ports`): walk, chunk, refuse an
accidental shrink, plan against the serving build, embed what changed, write, commit.
Exit 0: committed or up to date; 2: refused or failed, the cause in one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import ray

from actors.build_ports import run_reindex
from actors.metrics import record_reindex
from cluster.errors import PathRefused, SamespaceError, original_error
from cluster.settings import load_settings
from cluster.sync import admit_folder


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # `ray job stop` sends SIGTERM: unwind so the build is dropped


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m jobs.reindex", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="repository folder to index")
    parser.add_argument("--name", help="index (repo) name; default: the folder's name")
    parser.add_argument(
        "--full", action="store_true", help="embed every chunk again (default: reuse the vectors of unchanged chunks)"
    )
    parser.add_argument(
        "--allow-shrink",
        action="store_true",
        help="commit even when the new build drops more than ingest.max_shrink_share of the "
        "serving build's files (or all of them)",
    )
    parser.add_argument(
        "--ref", help="index this branch, tag or commit (from the repository's objects) instead of the folder"
    )
    parser.add_argument("--build-id", help="the build's id, as announced by whoever submitted the job")
    parser.add_argument(
        "--confined",
        action="store_true",
        help="an MCP client asked for this build: the folder must still lie inside index.allowed_roots",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = load_settings()
    try:  # again, before anything is read: the folder may have changed since the build was asked for
        roots = settings.index.allowed_roots
        repo = admit_folder(str(args.repo.absolute()), roots, Path.home(), confined=args.confined)
    except PathRefused as refused:
        print(f"reindex failed: {refused}", file=sys.stderr, flush=True)
        return 2
    name = args.name or repo.name
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    ray.init(address=settings.ray.address, namespace=settings.ray.namespace, log_to_driver=False)
    started, ok = time.monotonic(), False
    try:
        run_reindex(
            settings,
            repo,
            name,
            emit=lambda line: print(line, flush=True),
            full=args.full,
            allow_shrink=args.allow_shrink,
            ref=args.ref,
            build_id=args.build_id,
        )
        ok = True
    except SamespaceError as exc:
        # Say the cause, once, without a remote traceback.
        print(f"reindex failed: {original_error(exc)}", file=sys.stderr, flush=True)
        return 2
    finally:  # exported as the driver exits (Ray flushes a driver's metrics at shutdown)
        record_reindex(name, time.monotonic() - started, ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
