"""``python -m thunder_padvec doctor``: each check's finding, and that no check raises."""

from __future__ import annotations

import pytest
import torch

from thunder_padvec import doctor
from thunder_padvec.__main__ import main


def _by_check(findings):
    return {f.check: f for f in findings}


def test_every_check_reports_on_this_machine(tmp_path, monkeypatch, capsys):
    """NVRTC compiles the kernel padvec plans for a small program, the host compiler runs it equal to eager,
    the cache folder is written; without a GPU its two checks are skipped, not failed."""
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "cache"))
    found = _by_check(doctor.run())
    assert list(found) == [name for name, _ in doctor.CHECKS]
    assert found["versions"].status in ("ok", "warning") and torch.__version__ in found["versions"].detail
    assert found["NVRTC"].status == "ok"
    arch = "sm_90" if not torch.cuda.is_available() else "sm_"
    assert found["kernel compile"].status == "ok" and f"padvec0 for {arch}" in found["kernel compile"].detail
    assert found["emulation"].status == "ok" and found["emulation"].detail.endswith("equal to eager bit for bit")
    assert found["disk cache"] == doctor.Finding("disk cache", "ok", f"{tmp_path / 'cache'}, writable")
    assert not list((tmp_path / "cache").glob(".doctor-*"))  # the probe file is gone
    if not torch.cuda.is_available():
        assert found["GPU"].status == found["GPU launch"].status == "skipped"
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["versions", "NVRTC", "kernel", "emulation", "GPU", "GPU", "disk",
                                                   "settings"]


def test_a_check_that_raises_is_a_failed_finding_and_the_others_still_run():
    def broken():
        raise RuntimeError("no driver\nmore lines")

    findings = doctor.run((("broken", broken), ("settings", doctor.settings)))
    assert findings[0] == doctor.Finding("broken", "failed", "RuntimeError: no driver")
    assert findings[1].check == "settings" and findings[1].status == "ok"


def test_a_cache_folder_that_cannot_be_made_is_a_warning(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "a-file"))
    finding = doctor.disk_cache()
    assert finding.status == "warning" and "not writable" in finding.detail
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", "off")
    assert doctor.disk_cache().status == "ok"


@pytest.mark.filterwarnings("error")  # the fallback's warning is the finding, not printed
@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_missing_host_compiler_fails_emulation_whether_or_not_the_kernel_is_cached(tmp_path, monkeypatch, capsys,
                                                                                     strict):
    """With or without ``THUNDER_PADVEC_STRICT`` (a fallback to PyTorch, or the error raised). Nothing cached:
    no kernel is planned, so the compile check is skipped; the kernel cached by a run with the compiler: the
    emulation check builds it once more and fails, and NVRTC compiles the cached plan's kernel."""
    from thunder_padvec.runtime import cache

    monkeypatch.setenv("THUNDER_PADVEC_STRICT", strict)
    monkeypatch.setenv("THUNDER_PADVEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("THUNDER_PADVEC_DUMP_DIR", str(tmp_path / "dump"))
    cache.clear_memory()
    missing = str(tmp_path / "no-such-compiler")
    monkeypatch.setenv("THUNDER_PADVEC_CXX", missing)
    emulated = doctor.emulation_run()
    assert emulated.status == "failed" and "no-such-compiler failed to compile a padvec kernel" in emulated.detail
    assert doctor.kernel_compile().status == "skipped"
    assert main(["doctor"]) == 1
    assert "failed" in capsys.readouterr().out
    monkeypatch.delenv("THUNDER_PADVEC_CXX")
    assert doctor.emulation_run().status == "ok"  # now cached
    monkeypatch.setenv("THUNDER_PADVEC_CXX", missing)
    emulated = doctor.emulation_run()
    assert emulated.status == "failed" and "from the cache; built again" in emulated.detail, emulated
    assert doctor.kernel_compile().status == "ok"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_gpu_checks_pass_on_the_gpu():
    found = _by_check(doctor.run())
    assert found["GPU"].status == "ok" and torch.cuda.get_device_name() in found["GPU"].detail
    assert found["GPU launch"].status == "ok", found["GPU launch"]
    major, minor = torch.cuda.get_device_capability()
    assert f"for sm_{major}{minor}" in found["kernel compile"].detail
