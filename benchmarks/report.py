"""``python benchmarks/report.py run.json [...] [--out benchmarks/results]``: see ``thunder_padvec.bench.report``."""

import thunder_padvec  # noqa: F401  (the compat shim runs before Thunder is imported)
from thunder_padvec.bench.report import main

if __name__ == "__main__":
    main()
