"""A fingerprint of the code a component runs: part of that component's settings, so its cache.

TFX 1.16 keys a cached execution on its node, executor class path, inputs and parameters, and
hashes only a `module_file`'s contents (tfx/orchestration/portable/cache_utils.py): the source
of a Python-function component, of a custom executor and of module code imported by name is not
in the key. The factory gives each component whose behaviour our code decides the fingerprint of
the module it runs, so an edit to that code re-runs it (and, through new artifacts, what reads
its outputs) and nothing else; ML Metadata records which code made each artifact.

A module's code is its own source, its packages' `__init__.py` files and, transitively, every
module of ours (components/, data_prep/) it imports, found by reading the import statements
(those inside functions too) without importing anything. That is sound for code reached by
import; code started by other means (a subprocess's `-m module`) is named by an import of its
module in the module that starts it.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import pathlib

PROJECT_ROOT = pathlib.Path(__file__).resolve().parents[1]
OWN_PACKAGES = ("components", "data_prep")  # pipeline/ runs in the runner, not in a component


def _module_file(root: pathlib.Path, module: str) -> pathlib.Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(path: pathlib.Path, module: str) -> frozenset[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return _imports_in(path.read_bytes(), package)


@functools.lru_cache(maxsize=1024)
def _imports_in(source: bytes, package: str) -> frozenset[str]:
    """The dotted names the import statements of a source may load: `from a import b` loads
    module a and, where b is a module, a.b. Cached by content: each file is parsed once per
    process however many components import it, and an edited file is parsed again."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's package, one level up per extra dot
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(found)


def source_files(module: str, root: pathlib.Path = PROJECT_ROOT) -> list[pathlib.Path]:
    """The files whose code runs when `module` is imported: it, its packages' __init__.py and
    what they import from our packages, transitively, sorted."""
    seen: dict[str, pathlib.Path] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        if name in seen or parts[0] not in OWN_PACKAGES:
            continue
        path = _module_file(root, name)
        if path is None:  # a name imported from a module, not a module
            continue
        seen[name] = path
        pending.extend(".".join(parts[:depth]) for depth in range(1, len(parts)))
        pending.extend(_imported_modules(path, name))
    return sorted(set(seen.values()))


def code_fingerprint(module: str, root: pathlib.Path = PROJECT_ROOT) -> str:
    """SHA-256 over the paths (relative to root) and bytes of source_files(module)."""
    digest = hashlib.sha256()
    for path in source_files(module, root):
        digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
