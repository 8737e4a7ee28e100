"""The import graph of src/tnmt, read from the source (every `import`, those inside functions too): each module
imports only from its own layer or below, no two modules import each other at load time, and LibreTranslate's
API is a folder the server could do without (its router is the one door in, and it uses nothing of /v1's)."""

import ast
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src" / "tnmt"

# lowest first: a module may import from its own layer and those before it
LAYERS = (
    ("errors", "exports", "directions", "config", "io", "aligning_head"),
    ("data", "device", "recipe"),
    ("blocks", "model", "checkpoint"),
    ("decode",),
    ("translate", "evaluate"),
    ("train",),
    ("views",),
    ("documents",),
    ("interop",),
    ("serve",),
    ("quickstart", "cli", "__main__", "__init__"),
)
LAYER = {name: n for n, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    return {
        ".".join(("tnmt", *path.relative_to(SOURCE).with_suffix("").parts)).removesuffix(".__init__"): path
        for path in SOURCE.rglob("*.py")
    }


def _imports(path: Path, *, load_time_only: bool = False) -> set[str]:
    """The tnmt modules `path` imports (with `load_time_only`, only those its top level imports)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if load_time_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tnmt"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("tnmt")}
    return found


def _layer(module: str) -> int:
    return LAYER[module.split(".")[1]] if module != "tnmt" else LAYER["__init__"]


def test_every_module_has_a_layer():
    assert {module.split(".")[1] for module in _modules() if module != "tnmt"} <= set(LAYER)


def test_no_import_goes_up_a_layer():
    upward = [
        f"{module} imports {imported}"
        for module, path in _modules().items()
        for imported in _imports(path)
        if _layer(imported) > _layer(module)
    ]
    assert upward == []


def test_no_two_modules_import_each_other_at_load_time():
    graph = {
        module: {i for i in _imports(path, load_time_only=True) if i in _modules()}
        for module, path in _modules().items()
    }
    cycles, done = [], set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            cycles.append(trail[trail.index(module) :] + [module])
            return
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []


def test_libretranslates_folder_is_one_router_that_uses_nothing_of_the_v1_api():
    folder = "tnmt.serve.libretranslate"
    importers = {
        module
        for module, path in _modules().items()
        if not module.startswith(folder) and any(i.startswith(folder) for i in _imports(path))
    }
    assert importers == {"tnmt.serve.app"}
    inside = {module: path for module, path in _modules().items() if module.startswith(folder)}
    assert all("tnmt.serve.native" not in _imports(path) for path in inside.values())


def test_the_server_runs_without_libretranslates_folder(tmp_path):
    """The folder deleted and its router line taken out of serve/app.py: the server's app is built and answers
    /v1 and its probes (a subprocess, on a copy of the package)."""
    import shutil

    copy = tmp_path / "tnmt"
    shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.rmtree(copy / "serve" / "libretranslate")
    app = copy / "serve" / "app.py"
    lines = [line for line in app.read_text().splitlines(keepends=True) if "libretranslate" not in line]
    app.write_text("".join(lines))
    script = (
        "from fastapi.testclient import TestClient\n"
        "from tnmt.config import ServeConfig\n"
        "from tnmt.serve.app import create_app\n"
        "with TestClient(create_app([], ServeConfig())) as client:\n"
        "    assert client.get('/health').json() == {'status': 'ok'}\n"
        "    assert client.get('/v1/models').json()['models'] == []\n"
        "    assert client.post('/translate', json={}).status_code == 404\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
