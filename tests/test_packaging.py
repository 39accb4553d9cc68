"""The wheel carries schemas/ and templates/, and works from a fresh virtualenv outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from gpuplan import resources


def test_locator_finds_checkout_folders():
    assert resources.resource_dir("schemas") == ROOT / "schemas"
    assert (resources.resource_dir("templates")).is_dir()


def test_locator_prefers_installed_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    package = tmp_path / "gpuplan"
    (package / "_data" / "schemas").mkdir(parents=True)
    monkeypatch.setattr(resources, "_PACKAGE", package)
    assert resources.resource_dir("schemas") == package / "_data" / "schemas"
    with pytest.raises(resources.GpuplanError, match="templates/ folder is missing"):
        resources.resource_dir("templates")


@pytest.mark.slow
def test_wheel_in_fresh_venv_lints_from_anywhere(tmp_path: Path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("gpuplan-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The dependencies come from this environment; gpuplan itself only from the wheel.
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "_deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(EXAMPLES / "finetune-llama-8b-lora.yaml", work / "spec.yaml")
    where = subprocess.run(
        [str(python), "-c", "import gpuplan.resources as r; print(r.schema_path())"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
    completed = subprocess.run(
        [str(venv / "bin" / "gpuplan"), "lint", "spec.yaml"], cwd=work, capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = subprocess.run(
        [str(venv / "bin" / "gpuplan"), "report", "--pdf", "-o", "plan.pdf", "spec.yaml"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stdout + report.stderr
    assert (work / "plan.pdf").read_bytes().startswith(b"%PDF")
    listing = subprocess.run([str(python), "-m", "zipfile", "-l", str(wheel)], capture_output=True, text=True).stdout
    assert "gpuplan/_data/schemas/workload.schema.json" in listing
    assert "gpuplan/_data/templates/report.html.j2" in listing
    assert "gpuplan/_data/templates/fonts/DejaVuSans.ttf" in listing
    assert "gpuplan/catalog/gpus.yaml" in listing and "gpuplan/_data/schemas/config.schema.json" in listing
