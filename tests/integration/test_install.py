"""`pip install` on a machine without a C compiler: setup.py marks the extension optional, so the
install succeeds and pocketmq runs on its pure-Python references (README, "Dependencies")."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest

from pocketmq.protocol import native

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_an_install_without_a_compiler_runs_on_the_references(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    # CC also names the linker when LDSHARED is unset: neither step can run.
    env = {k: v for k, v in os.environ.items() if k != native.PURE_PYTHON_ENV}
    env.update(CC="false", HOME=str(tmp_path))

    def run(*argv: str) -> str:
        out = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
            timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    pip = ("-m", "pip", "--disable-pip-version-check")
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(tree))
    (wheel,) = tmp_path.glob("pocketmq-*.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    site = tmp_path / "site"
    run(*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel))

    # The installed copy first on the path; its dependencies are this environment's.
    env["PYTHONPATH"] = str(site)
    where = run("-c", "import pocketmq; print(pocketmq.__file__)")
    assert Path(where.strip()).is_relative_to(site)
    assert ", pure Python (pocketmq._speedups not built: " in run("-m", "pocketmq.cli", "--version")
    result = orjson.loads(
        run("-m", "pocketmq.cli", "store", "bench", "--dir", str(tmp_path / "store"),
            "--count", "300", "--json")
    )  # fmt: skip
    assert (result["acked"], result["failed"]) == (300, 0)
