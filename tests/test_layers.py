"""The package's layers, read from the import statements of every module (those inside functions
and under ``if TYPE_CHECKING:`` included): each layer imports only the layers below it, nothing
but the command line imports the command line, no command imports another, and no modules import
each other in a loop. docs/architecture.md describes the layers and these rules. (How complex a
function may be is ruff's McCabe check, configured in pyproject.toml: it replaced this module's
line counts of functions and classes, issue 39.)
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

import dgl_graphtx

PACKAGE = Path(dgl_graphtx.__file__).parent
ROOT = "dgl_graphtx"

#: The layers, bottom first (docs/architecture.md names them): a module imports modules of its own
#: part and of the parts of lower layers. A part is a subpackage or a module of the top level;
#: two parts of one layer (``nn`` and ``featurize``, say) do not import each other, except in the
#: foundation, whose modules are small and use each other.
LAYERS: List[Set[str]] = [
    {"__init__", "_version", "_dgl_env", "_ogb", "errors", "logs", "atomic_io", "saved_files", "progressive_csv", "checksums", "validation",
     "devices", "threads", "env_info", "worker_pool"},
    {"relation_graph"},
    {"nn", "featurize", "uncertainty"},
    {"datasets", "models", "testing"},
    {"checkpoint", "insight"},
    {"training"},
    {"inference"},
    {"runs"},
    {"cli", "predict"},
    {"console"},
    {"__main__"},
]
FOUNDATION = LAYERS[0]


def _modules() -> Dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = (ROOT,) + path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Set[str]:
    """The package's modules that ``name`` imports: a package's face for ``from pkg import Name``,
    the submodule for ``from pkg import submodule``."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = {f"{source}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(source)
    return {target for target in found if target in MODULES and target != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _part(module: str) -> str:
    """The subpackage or top-level module ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(part: str) -> int:
    """The layer of ``part`` (one above the top for a part not placed yet, which the test below names)."""
    return next((i for i, layer in enumerate(LAYERS) if part in layer), len(LAYERS))


def test_every_part_of_the_package_has_a_layer():
    parts = {_part(module) for module in MODULES}
    placed = set().union(*LAYERS)
    assert parts <= placed, f"give these a layer in LAYERS (and in docs/architecture.md): {sorted(parts - placed)}"


def test_imports_run_down_the_layers():
    wrong = []
    for module, targets in GRAPH.items():
        here = _part(module)
        for target in targets:
            there = _part(target)
            if there == here or (here in FOUNDATION and there in FOUNDATION):
                continue
            if _layer(there) >= _layer(here):
                wrong.append(f"{module} -> {target}")
    assert not wrong, "imports that do not run down the layers:\n" + "\n".join(sorted(wrong))


def test_only_the_command_line_imports_the_command_line():
    wrong = [f"{module} -> {target}" for module, targets in GRAPH.items() for target in targets
             if _part(target) == "cli" and _part(module) not in ("cli", "console", "__main__")]
    assert not wrong, "the library imports its command line:\n" + "\n".join(sorted(wrong))


def test_no_command_imports_another():
    commands = {module for module, path in MODULES.items()
                if _part(module) == "cli" and any(isinstance(node, ast.FunctionDef) and node.name == "register"
                                                  for node in ast.parse(path.read_text()).body)}
    wrong = [f"{module} -> {target}" for module in commands for target in GRAPH[module] if target in commands]
    assert commands and not wrong, "commands that import other commands:\n" + "\n".join(sorted(wrong))


def _cycles() -> List[List[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(GRAPH[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_loop():
    cycles = _cycles()
    assert not cycles, "modules that import each other in a loop:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("source, expected", [
    ("from . import graph_ops as ops", {"dgl_graphtx.nn.graph_ops"}),
    ("from ..models import ModelConfig", {"dgl_graphtx.models"}),
    ("def f():\n    from ..cli.train import run", {"dgl_graphtx.cli.train"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .graph_ops import x", {"dgl_graphtx.nn.graph_ops"}),
])
def test_imports_are_read_with_relative_deferred_and_typing_only_ones(tmp_path, source, expected):
    path = tmp_path / "attention.py"
    path.write_text(source)
    assert _imports("dgl_graphtx.nn.attention", path) == expected
