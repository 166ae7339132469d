"""The devices a generation test runs on: the CPU in the suite, and a CUDA GPU in a GPU run (tests/conftest.py)."""

import pytest

ON_EACH_DEVICE = pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
