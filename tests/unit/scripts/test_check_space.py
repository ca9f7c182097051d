"""``scripts/check_space.py``: ``make install`` refuses in one line where torch cannot fit.

Run with ``python -S`` (no site-packages), where torch is not importable, as in a new venv.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "check_space.py"


def _run(*args: str, site: bool = False) -> subprocess.CompletedProcess[str]:
    flags = [] if site else ["-S"]
    return subprocess.run([sys.executable, *flags, str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_refuses_in_one_line_naming_the_space(tmp_path: Path) -> None:
    result = _run(str(tmp_path / ".venv"), "1e9")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "needs about 1e+09 GiB free" in lines[0] and "GiB are free" in lines[0]
    assert not (tmp_path / ".venv").exists()


@pytest.mark.parametrize("where", [".venv", "not/made/yet/.venv"])
def test_passes_where_there_is_room(tmp_path: Path, where: str) -> None:
    result = _run(str(tmp_path / where), "0")
    assert (result.returncode, result.stderr) == (0, "")


def test_passes_whatever_the_space_where_torch_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    assert _run(str(tmp_path), "1e9", site=True).returncode == 0


@pytest.mark.parametrize("args", [(), ("a", "1", "extra"), ("venv", "lots")])
def test_bad_arguments_exit_2(args: tuple[str, ...]) -> None:
    result = _run(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
