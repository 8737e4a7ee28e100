"""Lazy public names: a name's module is imported when the name is first read, and not before."""

import subprocess
import sys

import pytest

from tnmt.exports import lazy_exports


def test_names_resolve_on_first_read_and_unknown_ones_are_attribute_errors():
    getattr_, dir_ = lazy_exports("tnmt", {"load_checkpoint": "tnmt.checkpoint"})
    from tnmt.checkpoint import load_checkpoint

    assert getattr_("load_checkpoint") is load_checkpoint and "load_checkpoint" in dir_()
    with pytest.raises(AttributeError, match="^module 'tnmt' has no attribute 'nope'$"):
        getattr_("nope")


def test_importing_the_packages_does_not_import_torch():
    code = "import sys, tnmt, tnmt.data; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
