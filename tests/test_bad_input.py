"""Broken configs and CLI calls, table-driven: each gives one line naming the problem, exit code
2, no traceback, no password, and nothing created in the storage or the run folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _support import config_file, launch

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-pw"

# (id, fields replaced in the base config | raw YAML text, extra CLI args, expected words)
CASES: list[tuple[str, dict | str | None, list[str], str]] = [
    ("missing-file", None, ["nope.yaml"], "config: cannot read nope.yaml"),
    ("malformed-yaml", "study: [t\nmodel: {name: lenet}\n", [], "is not valid YAML at line"),
    ("python-tag", "study: !!python/object/apply:os.system ['touch pwned']\n", [],
     "is not valid YAML"),
    ("not-a-mapping", "- study\n- model\n", [], "must hold a mapping"),
    ("empty-file", "", [], "study: is None"),
    ("unknown-key", {"colour": "blue"}, [], "colour: unknown field"),
    ("missing-model", {"model": None}, [], "model: must be a name or a mapping"),
    ("unknown-model", {"model": {"name": "resnet"}}, [], "model.name: unknown model 'resnet'"),
    ("unimportable-model", {"model": {"name": "nowhere.mod:Net"}}, [],
     "model.name: cannot import module 'nowhere.mod'"),
    ("unknown-model-arg", {"model": {"name": "lenet", "width": 3}}, [], "model.width:"),
    ("bad-model-value", {"model": {"name": "lenet", "activation": "tanh"}}, [],
     "model.activation:"),
    ("unknown-data", {"data": {"name": "cifar10"}}, [], "data.name: unknown data module"),
    ("missing-fashion-files", {"data": {"name": "fashion_mnist", "root": "nowhere"}}, [],
     "data.root: no Fashion-MNIST files under 'nowhere'"),
    ("empty-space", {"space": {}}, [], "space: must search at least one"),
    ("unknown-distribution", {"space": {"lr": {"normal": [0, 1]}}}, [],
     "space.lr: unknown distribution 'normal'"),
    ("low-above-high", {"space": {"lr": {"uniform": [0.5, 0.1]}}}, [],
     "space.lr.uniform: low is 0.5 and high is 0.1"),
    ("log-touching-zero", {"space": {"lr": {"loguniform": [0, 1]}}}, [],
     "space.lr.loguniform: low is 0"),
    ("randint-floats", {"space": {"batch_size": {"randint": [1.5, 8]}}}, [],
     "space.batch_size.randint: bounds must be integers"),
    ("space-wrong-type", {"space": {"lr": {"uniform": "0.1..1"}}}, [],
     "space.lr.uniform: must be a list [low, high]"),
    ("space-not-a-hyperparameter", {"space": {"depth": {"randint": [1, 4]}}, "initial": []}, [],
     "space.depth: is not a hyperparameter"),
    ("range-refused-by-model", {"space": {"lr": {"uniform": [-1.0, 1.0]}}, "initial": []}, [],
     "space.lr: the low end -1.0 is refused"),
    ("initial-outside-space", {"initial": [{"lr": 7.0}]}, [], "initial[0].lr: 7.0 is outside"),
    ("initial-unknown", {"initial": [{"momentum": 0.5}]}, [],
     "initial[0].momentum: is not a searched hyperparameter"),
    ("unknown-sampler", {"sampler": "cmaes"}, [], "sampler.name: is 'cmaes'"),
    ("unknown-pruner", {"pruner": {"name": "median"}}, [], "pruner.name: is 'median'"),
    ("reduction-factor-1", {"pruner": {"name": "asha", "max_resource": 9,
                                       "reduction_factor": 1}}, [],
     "pruner.reduction_factor: is 1"),
    ("max-below-min", {"pruner": {"name": "asha", "min_resource": 4, "max_resource": 2}}, [],
     "pruner.max_resource: is 2, but must be >= pruner.min_resource"),
    ("metric-not-logged", {"metric": "accuracy"}, [], "metric: 'accuracy' is not logged"),
    ("wrong-direction", {"direction": "down"}, [], "direction: is 'down'"),
    ("n-trials-zero", {"stop": {"n_trials": 0}}, [], "stop.n_trials: is 0"),
    ("n-trials-text", {"stop": {"n_trials": "ten"}}, [], "stop.n_trials: is 'ten'"),
    ("negative-budget", {"stop": {"max_wallclock_time": -5}}, [],
     "stop.max_wallclock_time: is -5"),
    ("no-stop-criterion", {"stop": {}}, [], "stop: needs n_trials or max_wallclock_time"),
    ("more-devices-than-exist", {"devices": {"accelerator": "cpu", "per_trial": 64}}, [],
     "devices.per_trial: is 64, but only"),
    ("device-count", {"devices": {"accelerator": "cpu", "count": 64}}, [],
     "devices.count: is 64"),
    ("no-gpu", {"devices": {"accelerator": "gpu"}}, [], "devices.accelerator: is gpu"),
    ("trainer-unknown", {"trainer": {"max_epochs": 2, "callbacks": []}}, [],
     "trainer.callbacks: unknown field"),
    ("study-escapes-run-dir", {"study": "../../etc"}, [], "study: is '../../etc'"),
    ("unreachable-postgres", {"storage": f"postgresql+psycopg2://hpo:{SECRET}@127.0.0.1:1/db"},
     [], "storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db"),
    ("password-in-other-error", {"storage": f"postgresql://hpo:{SECRET}@127.0.0.1:1/db",
                                 "direction": "sideways"}, [], "direction: is 'sideways'"),
    ("bad-set-syntax", {}, ["--set", "stop.n_trials"], "--set: 'stop.n_trials' must look like"),
    ("bad-set-value", {}, ["--set", "stop.n_trials=[1"], "--set stop.n_trials: cannot parse"),
    ("set-into-scalar", {}, ["--set", "study.name=x"], "--set study.name: 'study' is not a"),
]


@pytest.mark.parametrize(("fields", "args", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input(tmp_path: Path, fields: dict | str | None, args: list[str],
                   expected: str) -> None:
    config: list[str] = []
    if isinstance(fields, str):
        (tmp_path / "config.yaml").write_text(fields)
        config = [str(tmp_path / "config.yaml")]
    elif fields is not None:
        config = [str(config_file(tmp_path, **fields))]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = launch(*config, *args, cwd=tmp_path, timeout=180)
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert expected in lines[0], lines[0]
    assert "Traceback" not in result.stderr and SECRET not in result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no storage, no runs/
    assert not (tmp_path / "pwned").exists()


def test_there_are_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30 and len({c[0] for c in CASES}) == len(CASES)


def test_config_files_are_read_with_the_safe_loader(tmp_path: Path) -> None:
    text = yaml.safe_dump({"study": "t"}) + "x: !!python/name:os.system ''\n"
    (tmp_path / "c.yaml").write_text(text)
    result = launch(str(tmp_path / "c.yaml"), cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "not valid YAML" in result.stderr
