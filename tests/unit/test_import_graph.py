"""The package layering of STYLE.md, read from the source: imports point downwards.

- ``protocol`` is sans-IO: no asyncio, sockets, files or clocks, and nothing of ours but
  ``errors``; so is ``filter`` (the SQL92 selector). One exception: ``protocol.native``, the
  boundary to the C extension, imports ``pocketmq._speedups`` and reads ``os.environ``.
- ``client`` reaches (directly or through what it imports) only ``protocol``, ``remoting``
  and the shared root modules: never ``store``, ``broker`` or ``namesrv``.
- ``admin`` (the admin library) is a client too: the same rule as ``client``.
- ``testing`` reaches only ``protocol`` and ``errors``: its server is a child process.
- Nothing imports ``cli``; ``cli.main`` (what every ``pocketmq admin ...`` call loads) reaches
  no server-side package: the servers' commands are imported when invoked.

Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pocketmq

ROOT = Path(pocketmq.__file__).parent
# Standard modules that do I/O or read a clock.
_IO_MODULES = frozenset(
    {"asyncio", "socket", "selectors", "ssl", "time", "os", "io", "pathlib", "shutil",
     "tempfile", "threading", "subprocess", "datetime"}
)  # fmt: skip


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(p): p
        for p in ROOT.rglob("*.py")
        if "v2" not in p.relative_to(ROOT).parts  # generated protobuf code
    }


def _runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    def walk(nodes: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                yield from walk(node.orelse)
                continue
            for child in ast.walk(node):
                if isinstance(child, ast.Import | ast.ImportFrom):
                    yield child

    yield from walk(tree.body)


@cache
def _imports(module: str) -> frozenset[str]:
    """Every module ``module`` imports at run time (absolute names)."""
    modules = _modules()
    tree = ast.parse(modules[module].read_text())
    found: set[str] = set()
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            package = module.split(".")
            if modules[module].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        found.add(base)
        # `from pkg import mod` imports the module pkg.mod when there is one.
        found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules)
    return frozenset(found)


def _reachable(start: str) -> set[str]:
    modules = _modules()
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        todo.extend(_imports(name))
    return seen


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


# The native boundary's extra imports: os for POCKETMQ_PURE_PYTHON, and `from pocketmq import
# _speedups`, which reads as "pocketmq" here (the extension is no .py module); the test below
# holds both to exactly that.
_NATIVE_BOUNDARY = "pocketmq.protocol.native"
_NATIVE_BOUNDARY_IMPORTS = frozenset({"pocketmq", "os"})


def test_protocol_does_no_io_and_imports_nothing_above_it() -> None:
    for module in _modules():
        if not module.startswith("pocketmq.protocol"):
            continue
        for imported in _imports(module):
            if module == _NATIVE_BOUNDARY and imported in _NATIVE_BOUNDARY_IMPORTS:
                continue
            top = imported.split(".")[0]
            assert top not in _IO_MODULES, f"{module} imports {imported}"
            if top == "pocketmq":
                assert _package(imported) in ("pocketmq.protocol", "pocketmq.errors"), (
                    f"{module} imports {imported}"
                )


def test_the_native_boundary_imports_only_the_extension_and_the_environment() -> None:
    tree = ast.parse(_modules()[_NATIVE_BOUNDARY].read_text())
    from_pocketmq = {
        alias.name
        for node in _runtime_imports(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "pocketmq"
        for alias in node.names
    }
    assert from_pocketmq == {"_speedups"}
    os_uses = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id == "os"}  # fmt: skip
    assert os_uses == {"environ"}


def test_filter_does_no_io_and_imports_only_errors() -> None:
    for module in _modules():
        if not module.startswith("pocketmq.filter"):
            continue
        for imported in _imports(module):
            top = imported.split(".")[0]
            assert top not in _IO_MODULES, f"{module} imports {imported}"
            if top == "pocketmq":
                assert _package(imported) in ("pocketmq.filter", "pocketmq.errors"), (
                    f"{module} imports {imported}"
                )


def test_client_reaches_no_server_side_package() -> None:
    forbidden = ("pocketmq.store", "pocketmq.broker", "pocketmq.namesrv", "pocketmq.grpc")
    for module in _modules():
        if not module.startswith(("pocketmq.client", "pocketmq.admin")):
            continue
        reached = sorted(m for m in _reachable(module) if m.startswith(forbidden))
        assert not reached, f"{module} reaches {reached}"


def test_nothing_imports_the_cli() -> None:
    for module in _modules():
        if module.startswith("pocketmq.cli"):
            continue
        cli = sorted(
            m for m in _imports(module) if m == "pocketmq.cli" or m.startswith("pocketmq.cli.")
        )
        assert not cli, f"{module} imports {cli}"


def test_the_cli_entry_point_reaches_no_server_side_package() -> None:
    forbidden = ("pocketmq.store", "pocketmq.broker", "pocketmq.namesrv", "pocketmq.grpc.")
    reached = sorted(m for m in _reachable("pocketmq.cli.main") if m.startswith(forbidden))
    assert not reached, f"pocketmq.cli.main reaches {reached}"


def test_testing_reaches_only_the_protocol() -> None:
    # A user's test process imports pocketmq.testing next to its own clients (the 5.x client's
    # protobuf code clashes with pocketmq.grpc's): the server runs in a child process.
    allowed = ("pocketmq.testing", "pocketmq.protocol", "pocketmq.errors")
    for module in _modules():
        if not module.startswith("pocketmq.testing"):
            continue
        reached = sorted(
            m for m in _reachable(module) if m.startswith("pocketmq.") and not m.startswith(allowed)
        )
        assert not reached, f"{module} reaches {reached}"
