"""The Python examples of the README and the walkthrough run as written."""

import re

import pytest


def python_blocks(path) -> str:
    return "\n".join(re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S))


@pytest.mark.parametrize("name", ["README.md", "docs/walkthrough.md"])
def test_examples_run(repo_root, name):
    code = python_blocks(repo_root / name)
    assert code
    exec(compile(code, name, "exec"), {})
