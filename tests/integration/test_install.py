"""The package as a user installs it: a wheel, imported from outside the checkout.

One wheel is built per module run from a copy of the files the build reads (building in the
checkout would leave ``build/`` there, whose stale ``build/lib`` can ship a deleted module), and
installed with ``pip install --target`` into a folder that is the only entry of ``PYTHONPATH``;
the launcher then runs in an empty folder, where no ``configs/`` exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import pytest

import lightning_hpo

REPO = Path(__file__).resolve().parents[2]
#: What the build reads: pyproject.toml, the readme (the long description), the package and the
#: top-level configs/ folder it ships as lightning_hpo/configs/.
BUILD_INPUTS = ("pyproject.toml", "README.md", "lightning_hpo", "configs")
DISTRIBUTION = "lightning-async-hpo"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    site: Path  # the --target folder: the only PYTHONPATH entry of the subprocesses


def _pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "--no-index"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, source / name)
    _pip("wheel", "--no-build-isolation", "-w", str(root / "dist"), str(source))
    (wheel,) = (root / "dist").glob("*.whl")
    _pip("install", "--target", str(root / "site"), str(wheel))
    yield Installed(wheel, root / "site")


def _run(args: list[str], *, cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd`` with only the installed wheel on PYTHONPATH (not the checkout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_wheel_holds_the_package_and_the_configs_but_not_the_tests(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        shipped = {n for n in names if n.startswith("lightning_hpo/configs/")}
        modules = {n for n in names if n.endswith(".py")}
        for path in sorted((REPO / "configs").glob("*.yaml")):  # the one copy, as it is
            assert wheel.read(f"lightning_hpo/configs/{path.name}") == path.read_bytes()
        dist_info = {n.split("/")[0] for n in names if ".dist-info/" in n}
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(wheel.read(metadata).decode())
    configs = {f"lightning_hpo/configs/{p.name}" for p in (REPO / "configs").iterdir()}
    assert shipped == configs and len(configs) >= 5
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "lightning_hpo").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules == package  # every module (every subpackage listed in pyproject.toml)
    assert {n.split("/")[0] for n in names} == {"lightning_hpo", *dist_info}  # no tests/, configs/
    assert headers["Name"] == DISTRIBUTION  # not lightning-hpo: an unrelated project's name
    assert headers["Version"] == lightning_hpo.__version__


def test_the_launcher_checks_the_quickstart_from_an_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    """`python -m lightning_hpo.launch --check`, no argument, in an empty folder: the packaged
    quickstart is found, and nothing is written (the storage and runs/ would land here)."""
    where = _run(["-c", "import importlib.metadata as m, lightning_hpo as h, "
                  "lightning_hpo.launch.config as c; "
                  f"print(h.__file__, c.DEFAULT_CONFIG, m.version({DISTRIBUTION!r}))"],
                 cwd=tmp_path, site=installed.site)
    assert where.returncode == 0, where.stderr[-3000:]
    package = installed.site / "lightning_hpo"
    quickstart = package / "configs" / "quickstart.yaml"
    assert where.stdout.split() == [
        str(package / "__init__.py"), str(quickstart), lightning_hpo.__version__
    ]
    result = _run(["-m", "lightning_hpo.launch", "--check"], cwd=tmp_path, site=installed.site)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.startswith(
        "config OK: study 'quickstart' on runs/quickstart.journal (new journal file); "
        "run folder runs/quickstart; "
    ), result.stdout
    assert result.stdout.rstrip().endswith(f"; config file {quickstart}"), result.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_installed_launcher_lists_and_names_its_configs(
    installed: Installed, tmp_path: Path
) -> None:
    listed = _run(["-m", "lightning_hpo.launch", "--list-configs"], cwd=tmp_path,
                  site=installed.site)
    assert listed.returncode == 0, listed.stderr[-3000:]
    configs = installed.site / "lightning_hpo" / "configs"
    assert [line.split() for line in listed.stdout.splitlines()] == [
        [p.stem, str(configs / p.name)] for p in sorted((REPO / "configs").glob("*.yaml"))
    ]
    # The README's checkout path does not exist here: the one-line error names the way out.
    missing = _run(["-m", "lightning_hpo.launch", "configs/random_search.yaml", "--check"],
                   cwd=tmp_path, site=installed.site)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "error: config: cannot read configs/random_search.yaml: No such file or directory; "
        "or name a shipped config: dropout_mlp_tpe_hyperband, lenet_ddp, lenet_error_vs_size, "
        "lenet_fashion_mnist, quickstart, random_search"
    ]
    assert list(tmp_path.iterdir()) == []
