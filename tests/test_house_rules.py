"""The layers hold: go -> nets -> runtime -> engine, with distill, quantize, export and viz above
nets; no module imports the CLI; go imports no network library; backends never search. Read from
the source's own imports (AST, every import in a module, lazy ones inside functions included),
failing with the offending module, line and import."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT

SRC = ROOT / "src" / "kosumi"
ORDER = ("go", "nets", "runtime", "engine")  # each may import only those before it
ABOVE = ("distill", "quantize", "export", "viz")  # may import the layers, never imported by them
CLI = ("kosumi.cli", "kosumi.cli_models", "kosumi.cli_options")
NETWORK_LIBS = ("torch", "onnx", "onnxruntime", "tensorrt")


def imports(source: str, module: str) -> list[tuple[int, str]]:
    """(line, imported module) of every import in ``source`` (relative ones resolved)."""
    out = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ORDER + ABOVE) else ""


def violations(source: str, module: str) -> list[str]:
    """What ``module`` (e.g. "kosumi.runtime.loader") imports against the rules."""
    found = []
    mine = layer_of(module)
    for line, name in imports(source, module):
        where = f"{module}:{line} imports {name}"
        top = name.split(".")[0]
        if name.startswith(CLI) and not module.startswith(CLI) and module != "kosumi.__main__":
            found.append(f"{where}: only the CLI imports the CLI")
        if mine == "go" and top in NETWORK_LIBS:
            found.append(f"{where}: go (rules) imports no network library")
        if top != "kosumi" or mine not in ORDER:
            continue
        other = layer_of(name)
        if other in ABOVE:
            found.append(f"{where}: {mine} is below {other}")
        elif other in ORDER and ORDER.index(other) > ORDER.index(mine):
            found.append(f"{where}: {mine} is below {other} (go -> nets -> runtime -> engine)")
    return found


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_the_checker_catches_each_kind_of_violation():
    cases = {
        ("kosumi.go.board", "from kosumi.nets.features import x"): "go is below nets",
        ("kosumi.nets.graph", "import kosumi.runtime.loader"): "nets is below runtime",
        ("kosumi.runtime.numpy_backend", "def f():\n    from kosumi.engine import mcts"):
            "runtime is below engine",  # a backend that would search
        ("kosumi.runtime.loader", "from kosumi.export.onnx import x"): "runtime is below export",
        ("kosumi.engine.mcts", "from ..distill import labels"): "engine is below distill",
        ("kosumi.viz.report", "from kosumi.cli import app"): "only the CLI imports the CLI",
        ("kosumi.go.sgf", "import torch"): "go (rules) imports no network library",
    }
    for (module, source), reason in cases.items():
        found = violations(source, module)
        assert len(found) == 1 and reason in found[0] and module in found[0], (module, found)
    # and what is allowed passes
    assert violations("from kosumi.go.board import GameState", "kosumi.engine.mcts") == []
    assert violations("from kosumi.engine.elo import x", "kosumi.viz.strength") == []
    assert violations("from kosumi.cli_options import fail", "kosumi.cli_models") == []


def test_the_source_keeps_its_layers():
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 60
    found = []
    for path in files:
        found += violations(path.read_text(), module_name(path))
    assert found == [], "\n".join(found)
