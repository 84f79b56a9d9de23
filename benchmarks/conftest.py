import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import thunder_padvec  # noqa: E402,F401  (the compat shim runs before Thunder is imported)
from thunder_padvec.bench.stops import pytest_runtest_makereport  # noqa: E402,F401  (a time limit's interrupt)
