"""The RoPE benchmark suite: cases and executors (:mod:`.cases`), measuring one executor on one case
(:mod:`.measure`) and the results files (:mod:`.report`). ``benchmarks/`` runs it under
pytest-benchmark; ``python -m thunder_padvec bench`` runs it directly."""
