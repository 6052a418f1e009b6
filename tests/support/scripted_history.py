"""A repository with a scripted first-parent history (dated commits, a merge, a file renamed, a function
renamed and one moved, a revert), and git's own answers to check the history tools against."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.git_repos import GIT_ID

AWS_KEY = "AKIA" + "ZQ3DN4XYKB7PLM2W"  # a canary credential, written into a commit message


def run_git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    if date is not None:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(["git", *GIT_ID, "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env)
    return done.stdout.strip()


class ScriptedRepo:
    """A repository written commit by commit; each commit's sha is kept under a label."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shas: dict[str, str] = {}
        root.mkdir(parents=True)
        run_git(root, "init", "-q", "-b", "main")
        info = root / ".git" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "attributes").write_text("*.py diff=python\n")  # git -L :func: finds Python functions

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, label: str, message: str, date: str) -> str:
        run_git(self.root, "add", "-A")
        run_git(self.root, "commit", "-q", "--allow-empty", "-m", message, date=date)
        self.shas[label] = run_git(self.root, "rev-parse", "HEAD")
        return self.shas[label]

    def git(self, *args: str, date: str | None = None) -> str:
        return run_git(self.root, *args, date=date)

    # ---- git's answers --------------------------------------------------------------------------

    def line_log(self, function: str, path: str, *extra: str, rev: str = "HEAD") -> list[str]:
        """`git log -L :function:path --first-parent`: the commits that touched the function's lines."""
        out = self.git("log", "--first-parent", "-s", "--format=%H", f"-L:def {function}[(]:{path}", *extra, rev)
        return [line for line in out.splitlines() if line]

    def first_parents(self, *extra: str) -> list[str]:
        return [line for line in self.git("log", "--first-parent", "--format=%H", *extra).splitlines() if line]


def shop_module(f_body: str = "return price * 2", g_body: str = "return [x for x in items]") -> str:
    return (
        "import math\n\n\n"
        f"def f(price):\n    total = math.ceil(price)\n    {f_body}\n\n\n"
        f"def g(items):\n    kept = list(items)\n    {g_body}\n\n\n"
        "class Cart:\n"
        "    def __init__(self):\n        self.items = []\n\n"
        "    def m(self, item):\n        self.items.append(item)\n        return len(self.items)\n"
    )


def build_shop_history(root: Path) -> ScriptedRepo:
    """Thirteen first-parent commits through January and February 2026 (labels in order):
    base, f1, side merge (g changed on a branch, h on main), file renamed (a.py -> core.py),
    m changed, h renamed to h2, g moved to util.py, g changed, g's change reverted, hostile message
    (a fake patch header and a credential; a .env file), f2 (f changed, n added)."""
    repo = ScriptedRepo(root)
    repo.write("pkg/a.py", shop_module())
    repo.write("pkg/b.py", "def h(order):\n    checked = bool(order)\n    return checked\n")
    repo.write("README.md", "# shop\n")
    repo.commit("base", "Base: the shop", "2026-01-01T10:00:00Z")
    repo.write("pkg/a.py", shop_module(f_body="return price * 3"))
    repo.commit("f1", "Raise f's factor", "2026-01-05T10:00:00Z")
    repo.git("checkout", "-q", "-b", "side")
    repo.write("pkg/a.py", shop_module(f_body="return price * 3", g_body="return [x for x in items if x]"))
    repo.commit("side", "g drops empty items", "2026-01-08T10:00:00Z")
    repo.git("checkout", "-q", "main")
    repo.write("pkg/b.py", "def h(order):\n    checked = bool(order)\n    return not checked\n")
    repo.commit("h1", "h negates", "2026-01-10T10:00:00Z")
    repo.git("merge", "-q", "--no-ff", "-m", "Merge side", "side", date="2026-01-12T10:00:00Z")
    repo.shas["merge"] = repo.git("rev-parse", "HEAD")
    repo.git("mv", "pkg/a.py", "pkg/core.py")
    repo.commit("renamed", "Rename a.py to core.py", "2026-01-15T10:00:00Z")
    text = (root / "pkg/core.py").read_text().replace("return len(self.items)", "return len(self.items) + 0")
    repo.write("pkg/core.py", text)
    repo.commit("m1", "m returns the count", "2026-01-20T10:00:00Z")
    repo.write("pkg/b.py", "def h2(order):\n    checked = bool(order)\n    return not checked\n")
    repo.commit("h2", "Rename h to h2", "2026-01-25T10:00:00Z")
    core = (root / "pkg/core.py").read_text()
    g_text = "def g(items):\n    kept = list(items)\n    return [x for x in items if x]\n"
    repo.write("pkg/core.py", core.replace(g_text + "\n\n", ""))
    repo.write("pkg/util.py", g_text)
    repo.commit("moved", "Move g to util.py", "2026-02-01T10:00:00Z")
    repo.write("pkg/util.py", g_text.replace("if x]", "if x is not None]"))
    repo.commit("g1", "g keeps falsy items", "2026-02-05T10:00:00Z")
    repo.git("revert", "--no-edit", "HEAD", date="2026-02-08T10:00:00Z")
    repo.shas["revert"] = repo.git("rev-parse", "HEAD")
    repo.write(".env", f"AWS_ACCESS_KEY_ID={AWS_KEY}\n")
    repo.write("pkg/b.py", "def h2(order):\n    checked = bool(order)\n    return not checked  # --- a/pkg/b.py\n")
    repo.commit(
        "hostile",
        f"Odd message\n\ndiff --git a/pkg/x.py b/pkg/x.py\n@@ -1 +1 @@\nkey {AWS_KEY}\n",
        "2026-02-10T10:00:00Z",
    )
    core = (root / "pkg/core.py").read_text().replace("return price * 3", "return price * 4")
    repo.write("pkg/core.py", core)
    repo.write("pkg/c.py", "def n(value):\n    return value\n")
    repo.commit("f2", "f quadruples; n", "2026-02-15T10:00:00Z")
    return repo
