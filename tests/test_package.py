"""The package as a whole: its modules import each other without cycles, and `tnmt` exposes its API lazily."""

import ast
import subprocess
import sys
from pathlib import Path

import tnmt

SRC = Path(tnmt.__file__).resolve().parent


def module_imports() -> dict[str, set[str]]:
    """tnmt module -> the tnmt modules it imports at module level, type-only ones (`if TYPE_CHECKING:`) included:
    a circle through a type is still a circle a reader has to untangle. Imports inside functions are lazy."""
    graph = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imported = set()
        for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tnmt"):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name.startswith("tnmt")}
        graph[name] = imported
    return graph


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body, with those of its `if TYPE_CHECKING:` blocks."""
    statements = []
    for node in body:
        statements.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            statements += node.body
    return statements


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import cycle of `graph` as the modules along it (the first repeated), or None."""

    def visit(module: str, path: list[str]) -> list[str] | None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                return [*path[path.index(target) :], target]
            if cycle := visit(target, [*path, target]):
                return cycle
        return None

    return next((cycle for module in sorted(graph) if (cycle := visit(module, [module]))), None)


def test_no_import_cycles():
    graph = module_imports()
    assert len(graph) == len(list(SRC.rglob("*.py"))) and sum(map(len, graph.values())) > len(graph)
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # the search can fail
    guarded = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tnmt.x import y\n").body
    assert any(isinstance(n, ast.ImportFrom) and n.module == "tnmt.x" for n in _top_level(guarded))
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_public_names_load_on_first_use():
    code = "import sys, tnmt; assert 'torch' not in sys.modules; tnmt.Translator; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "True", result.stderr
    assert set(tnmt.__all__) <= set(dir(tnmt)) and tnmt.ModelConfig.__module__ == "tnmt.config"
