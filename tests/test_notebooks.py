"""The notebooks run from top to bottom (in CPU emulation where there is no GPU) without an error."""

from pathlib import Path

import pytest
import torch

nbformat = pytest.importorskip("nbformat")
NotebookClient = pytest.importorskip("nbclient").NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if not torch.cuda.is_available():  # emulation at the suite's shapes: two small models, both forms
        monkeypatch.setenv("PADVEC_NOTEBOOK_MODELS", "phi-2,pythia-160m")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "bit for bit equal to eager: True" in text
    assert "padvec0" in text
    if path.stem == "litgpt_models" and not torch.cuda.is_available():
        assert "cpu 4 cases" in text and text.count("bit for bit equal to eager: True") == 4
