"""Fixtures shared by the test files."""

import os
from pathlib import Path

import pytest
import torch

# Test tensors are tiny: one thread avoids oversubscription and makes timings steadier.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The local Multi30k copy (raw `.gz` files and `tok/`): `TNMT_DATA_DIR`, else the shared one."""
    if local := os.environ.get("TNMT_DATA_DIR"):
        return Path(local)
    shared = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "multi30k"
    if shared.is_dir():
        return shared
    pytest.skip("Multi30k not found: set TNMT_DATA_DIR or place ../shared/data/multi30k")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
