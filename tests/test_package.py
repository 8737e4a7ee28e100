"""The package as a whole: its modules import each other without cycles, and `tnmt` exposes its API lazily."""

import ast
import subprocess
import sys
from pathlib import Path

import tnmt

SRC = Path(tnmt.__file__).resolve().parent


def module_imports() -> dict[str, set[str]]:
    """tnmt module -> the tnmt modules it imports at module level (imports inside functions are lazy)."""
    graph = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        imported = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tnmt"):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name.startswith("tnmt")}
        graph[name] = imported
    return graph


def test_no_import_cycles():
    graph = module_imports()
    assert "tnmt.checkpoint" in graph and "tnmt.decode.translator" in graph["tnmt.train.loop"]

    def visit(module: str, path: list[str]) -> None:
        for target in graph.get(module, ()):
            assert target not in path, f"import cycle: {' -> '.join([*path[path.index(target) :], target])}"
            visit(target, [*path, target])

    for module in graph:
        visit(module, [module])


def test_public_names_load_on_first_use():
    code = "import sys, tnmt; assert 'torch' not in sys.modules; tnmt.Translator; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "True", result.stderr
    assert set(tnmt.__all__) <= set(dir(tnmt)) and tnmt.ModelConfig.__module__ == "tnmt.config"
