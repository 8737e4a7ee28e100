"""The Python examples of the docs run as written; the concept map names every module."""

import re

import pytest


def python_blocks(path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S))


@pytest.mark.parametrize("name", ["docs/serving.md", "docs/walkthrough.md"])
def test_examples_run(repo_root, name):
    code = python_blocks(repo_root / name)
    assert code
    exec(compile(code, name, "exec"), {})


def test_the_concept_map_names_every_module(repo_root):
    """Each module under src/tnmt has a row in "Where each concept lives": by its path, or by its file name
    on a line that names its package's directory (`src/tnmt/decode/greedy.py`, `beam.py`)."""
    text = (repo_root / "docs" / "concepts.md").read_text()
    rows = text.split("\n## Where each concept lives", 1)[1].split("\n## ", 1)[0].splitlines()
    package = repo_root / "src" / "tnmt"
    missing = []
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package).as_posix()
        if module.name in ("__init__.py", "__main__.py"):
            continue
        directory = f"src/tnmt/{module.parent.relative_to(package).as_posix()}/".replace("/./", "/")
        named = any(
            f"{relative}`" in row or (f"`{module.name}`" in row and (directory in row or "/" not in relative))
            for row in rows
        )
        if not named:
            missing.append(relative)
    assert not missing, f"modules without a row in docs/concepts.md's map: {missing}"
