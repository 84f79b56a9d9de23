import os
import tempfile

# Poisoned outputs make unwritten elements show; a private kernel cache keeps runs independent; strict
# mode makes a region that would fall back to PyTorch fail its test instead of passing with PyTorch's answer.
os.environ.setdefault("THUNDER_PADVEC_POISON", "1")
os.environ.setdefault("THUNDER_PADVEC_STRICT", "1")
os.environ.setdefault("THUNDER_PADVEC_CACHE_DIR", tempfile.mkdtemp(prefix="padvec-test-cache-"))

import thunder_padvec  # noqa: E402  (the compat shim must run before Thunder is imported)
import pytest  # noqa: E402
import torch  # noqa: E402

from thunder_padvec.bench.stops import pytest_runtest_makereport  # noqa: E402,F401  (a time limit's interrupt)

HAS_GPU = torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    """GPU tests skip where there is no GPU; where there is one they share a group, so that pytest-xdist
    with ``--dist loadgroup`` runs them one after the other in one worker (they time launch variants on the
    one GPU) while the other workers take the CPU tests."""
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    one_worker = pytest.mark.xdist_group("gpu")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(one_worker if HAS_GPU else skip)


@pytest.fixture
def emulated():
    with thunder_padvec.emulation(True):
        yield


@pytest.fixture
def generator():
    """A fresh random stream per test, seeded from the test's name so failures reproduce."""
    import zlib

    g = torch.Generator()
    g.manual_seed(zlib.crc32(os.environ.get("PYTEST_CURRENT_TEST", "").encode()))
    return g
