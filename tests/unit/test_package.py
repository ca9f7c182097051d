"""The public surface: what each name in ``__all__`` is, where it comes from, light imports, and
that each one's docstring examples run as copied into a fresh interpreter."""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import subprocess
import sys

import lightning as L
import optuna
import pytest
from lightning.pytorch.callbacks import Checkpoint

import lightning_hpo

# The public surface, name -> defining module: a change to it shows up here.
_SURFACE = {
    "ASHAPruner": "lightning_hpo.pruners",
    "HyperbandPruner": "lightning_hpo.pruners",
    "PruningCallback": "lightning_hpo.callbacks",
    "RandomState": "lightning_hpo.checkpointing",
    "ResumeCheckpoint": "lightning_hpo.checkpointing",
    "ConfigError": "lightning_hpo.errors",
    "DATAMODULES": "lightning_hpo.builtin.data",
    "DigitsDataModule": "lightning_hpo.builtin.data",
    "FashionMNISTDataModule": "lightning_hpo.builtin.data",
    "build_datamodule": "lightning_hpo.builtin.data",
    "TensorBatches": "lightning_hpo.builtin.tensor_data",
    "TensorDataModule": "lightning_hpo.builtin.tensor_data",
    "MODELS": "lightning_hpo.builtin.models",
    "DropoutMLP": "lightning_hpo.builtin.models",
    "LeNet": "lightning_hpo.builtin.models",
    "build_model": "lightning_hpo.builtin.models",
    "DistributedStudy": "lightning_hpo.distributed",
    "create_study": "lightning_hpo.distributed",
    "load_study": "lightning_hpo.distributed",
    "is_follower": "lightning_hpo.distributed",
    "LeaderError": "lightning_hpo.distributed",
    "rung_levels": "lightning_hpo.pruners.rungs",
    "hypervolume": "lightning_hpo.pareto",
    "nondominated_fronts": "lightning_hpo.pareto",
    "pareto_order": "lightning_hpo.pareto",
    "successive_halving_plan": "lightning_hpo.pruners.rungs",
}


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("name", sorted(_SURFACE))
def test_each_public_name_is_its_modules_own_object(name: str) -> None:
    module = importlib.import_module(_SURFACE[name])
    assert name in module.__all__, f"{name} is not public in {module.__name__}"
    assert getattr(lightning_hpo, name) is getattr(module, name)
    assert name in dir(lightning_hpo)


@pytest.mark.parametrize("name", sorted(_SURFACE))
def test_each_public_names_examples_import_what_they_use(name: str) -> None:
    """Run in an empty namespace (``--doctest-modules`` runs them in their module's, where
    ``torch`` or the name itself is defined already): an example copied into a fresh
    interpreter, or read on its own, works as shown."""
    tests = [test for test in doctest.DocTestFinder().find(
        getattr(lightning_hpo, name), name, module=importlib.import_module(_SURFACE[name]),
        globs={}) if test.examples]
    for test in tests:
        test.globs = {}
        runner = doctest.DocTestRunner(
            optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report: list[str] = []
        assert runner.run(test, out=report.append).failed == 0, "".join(report)


def test_most_public_names_show_an_example() -> None:
    """The test above is not empty: the names with a runnable example, as of writing."""
    shown = {name for name in _SURFACE if any(
        test.examples for test in doctest.DocTestFinder().find(
            getattr(lightning_hpo, name), name,
            module=importlib.import_module(_SURFACE[name]), globs={}))}
    assert len(shown) >= 19, sorted(set(_SURFACE) - shown)


def test_all_is_exactly_the_surface() -> None:
    assert sorted(lightning_hpo.__all__) == sorted(_SURFACE)


def test_what_the_public_names_are() -> None:
    hpo = lightning_hpo
    assert issubclass(hpo.ASHAPruner, optuna.pruners.BasePruner)
    assert issubclass(hpo.HyperbandPruner, optuna.pruners.BasePruner)
    assert issubclass(hpo.PruningCallback, L.Callback)
    assert issubclass(hpo.ResumeCheckpoint, Checkpoint)
    assert issubclass(hpo.RandomState, L.Callback)
    assert issubclass(hpo.DigitsDataModule, hpo.TensorDataModule)
    assert issubclass(hpo.TensorDataModule, L.LightningDataModule)
    assert issubclass(hpo.DistributedStudy, optuna.Study)
    assert issubclass(hpo.ConfigError, ValueError) and issubclass(hpo.LeaderError, RuntimeError)
    assert {"lenet": hpo.LeNet, "dropout_mlp": hpo.DropoutMLP} == hpo.MODELS
    assert all(issubclass(cls, L.LightningModule) for cls in hpo.MODELS.values())
    assert {"digits": hpo.DigitsDataModule,
            "fashion_mnist": hpo.FashionMNISTDataModule} == hpo.DATAMODULES
    assert all(issubclass(cls, L.LightningDataModule) for cls in hpo.DATAMODULES.values())
    assert type(hpo.build_model("lenet")) is hpo.LeNet
    assert type(hpo.build_datamodule("digits", batch_size=8)) is hpo.DigitsDataModule
    assert hpo.rung_levels(1, max_resource=27, reduction_factor=3) == [1, 3, 9, 27]
    assert hpo.successive_halving_plan(1, max_resource=27, reduction_factor=3) == [
        (1, 27), (3, 9), (9, 3), (27, 1)]
    assert hpo.is_follower() is False  # no launcher set a rank here
    assert type(hpo.create_study()) is hpo.DistributedStudy


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'lightning_hpo' has no attribute 'Nope'"):
        lightning_hpo.Nope  # noqa: B018


def test_public_names_are_imported_on_first_use() -> None:
    """``import lightning_hpo`` imports none of the heavy modules; the first use imports one."""
    code = (
        "import sys, lightning_hpo as hpo\n"
        "heavy = ('torch', 'lightning', 'optuna', 'lightning_hpo.pruners._asha')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "hpo.rung_levels\n"
        "print(sorted(m for m in heavy if m in sys.modules), 'rung_levels' in vars(hpo))\n"
    )
    assert _run(code).splitlines() == ["[]", "[] True"]


def test_pure_modules_do_not_import_torch() -> None:
    code = (
        "import lightning_hpo.pruners.rungs, lightning_hpo.errors, lightning_hpo.schema, sys\n"
        "print(sorted(m for m in ('torch', 'lightning', 'optuna') if m in sys.modules))"
    )
    assert _run(code) == "[]"


def test_version_is_the_installed_distributions() -> None:
    names = set(importlib.metadata.packages_distributions().get("lightning_hpo", []))
    assert names, "lightning_hpo is not installed (pip install -e .)"
    versions = {importlib.metadata.version(name) for name in names}
    assert versions == {lightning_hpo.__version__}
