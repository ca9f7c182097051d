"""Broken configs and CLI calls, table-driven: each gives one line naming the problem, exit code
2, no traceback, no password, and nothing created in the storage or the run folder. Then the
folder probe behind them, without a subprocess (``prepare_folders``), and that it writes nothing
where it must not. The storage look (``check_storage``) has its own tests in test_storage.py."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import yaml
from helpers.support import SECRET, _journal_with_garbage_inside, config_file, launch

import lightning_hpo.launch.processes.folders as launcher
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import load_config
from lightning_hpo.storage import open_storage

#: The base config's devices here, unless a case names its own: one slot. The early start begins
#: a worker on every core and the first one imported checks the config, so a config its check
#: refuses costs one import of torch and Lightning, not one per core (the other workers' being
#: stopped and leaving nothing is test_early_start.py's; "range-refused-by-model" below keeps
#: every core all the same).
ONE_SLOT = {"devices": {"accelerator": "cpu", "count": 1}}

# (id, fields replaced in the base config | raw YAML text | raw bytes, extra CLI args,
#  expected words). Paths are relative to the test's folder, where config.yaml is a file.
CASES: list[tuple[str, dict | str | bytes | None, list[str], str]] = [
    ("missing-file", None, ["nope.yaml"], "config: cannot read nope.yaml"),
    ("malformed-yaml", "study: [t\nmodel: {name: lenet}\n", [], "is not valid YAML at line"),
    ("python-tag", "study: !!python/object/apply:os.system ['touch pwned']\n", [],
     "is not valid YAML"),
    ("not-a-mapping", "- study\n- model\n", [], "must hold a mapping"),
    ("empty-file", "", [],
     "study: is missing: name the study (study: lenet-asha), or start from a shipped config"),
    ("unknown-key", {"colour": "blue"}, [], "colour: unknown field"),
    ("missing-model", {"model": None}, [], "model: must be a name or a mapping"),
    ("unknown-model", {"model": {"name": "resnet"}}, [], "model.name: unknown model 'resnet'"),
    ("unimportable-model", {"model": {"name": "nowhere.mod:Net"}}, [],
     "model.name: cannot import module 'nowhere.mod'"),
    ("unknown-model-arg", {"model": {"name": "lenet", "depth": 3}}, [], "model.depth:"),
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
    ("range-refused-by-model", {"space": {"lr": {"uniform": [-1.0, 1.0]}}, "initial": [],
                                "devices": {"accelerator": "cpu"}}, [],
     "space.lr: the low end -1.0 is refused"),
    ("initial-outside-space", {"initial": [{"lr": 7.0}]}, [], "initial[0].lr: 7.0 is outside"),
    ("initial-beyond-n-trials", {"initial": [{"lr": 0.1}, {"lr": 0.2}], "stop": {"n_trials": 1}},
     [], "initial: lists 2 configurations, but stop.n_trials is 1: give at most 1"),
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
    # YAML 1.1 reads these as something else than written: 90 seconds, 511 trials, True
    ("yaml-sexagesimal", "study: t\nmodel: lenet\nstop: {max_wallclock_time: 1:30}\n", [],
     "stop.max_wallclock_time: 1:30 is read by YAML 1.1 as the base-60 number 90 (1*60 + 30); "
     "write the number itself (e.g. 90) for a number, or \"1:30\" in quotes for text"),
    ("yaml-octal-set", {}, ["--set", "stop.n_trials=0777"],
     "--set stop.n_trials: 0777 is read by YAML 1.1 as the octal number 511; write 511 or 777 "
     "(no leading zero) for a number, or --set stop.n_trials='\"0777\"' for text"),
    ("yaml-on", "study: t\nmodel: lenet\npruner: {name: asha, mode: on}\n", [],
     "pruner.mode: on is read by YAML 1.1 as the boolean true; write true or false for a "
     "boolean, or \"on\" in quotes for text"),
    # A typo: the run queued tickets for minutes, and Ctrl-C left thousands in the study.
    ("n-trials-typo", {"stop": {"n_trials": 99999999999999999999}}, [],
     "stop.n_trials: is 99999999999999999999, but must be an integer from 1 to 10000 (the "
     "study queues every trial of it before the first starts"),
    ("check-n-trials-typo", {"stop": {"n_trials": 99999999999999999999}}, ["--check"],
     "stop.n_trials: is 99999999999999999999, but must be an integer from 1 to 10000 (the "
     "study queues every trial of it before the first starts"),
    ("negative-budget", {"stop": {"max_wallclock_time": -5}}, [],
     "stop.max_wallclock_time: is -5"),
    ("no-stop-criterion", {"stop": {}}, [], "stop: needs n_trials or max_wallclock_time"),
    ("more-devices-than-exist", {"devices": {"accelerator": "cpu", "per_trial": 64}}, [],
     "devices.per_trial: is 64, but only"),
    ("device-count", {"devices": {"accelerator": "cpu", "count": 64}}, [],
     "devices.count: is 64"),
    ("trials-per-device-beyond-memory", {"devices": {"accelerator": "cpu",
                                                     "trials_per_device": 100000}}, [],
     "devices.trials_per_device: is 100000: "),
    ("no-gpu", {"devices": {"accelerator": "gpu"}}, [], "devices.accelerator: is gpu"),
    ("trainer-callbacks", {"trainer": {"max_epochs": 2, "callbacks": []}}, [],
     "trainer.callbacks: needs a LightningCLI config"),
    ("trainer-unknown", {"trainer": {"max_epochs": 2, "not_an_arg": 1}}, [],
     "trainer.not_an_arg: is not an argument of Lightning's Trainer"),
    ("trainer-owned", {"trainer": {"max_epochs": 2, "devices": 2}}, [],
     "trainer.devices: is set by the launcher"),
    ("trainer-fit-value", {"trainer": {"max_epochs": 2, "accumulate_grad_batches": 0}}, [],
     "trainer.accumulate_grad_batches: is 0, but must be an integer >= 1"),
    # Lightning's fit refuses it once the data is loaded: every trial would fail.
    ("validation-beyond-an-epoch", {"trainer": {"max_epochs": 2, "limit_train_batches": 4,
                                                "limit_val_batches": 2, "val_check_interval": 5}},
     [], "trainer.val_check_interval: is 5, but an epoch has 4 training batches"),
    ("last-epoch-not-validated", {"trainer": {"max_epochs": 3, "check_val_every_n_epoch": 2,
                                              "limit_train_batches": 4, "limit_val_batches": 2}},
     [], "trainer.check_val_every_n_epoch: validates every 2 epochs, but trials train up to 3 "
         "(pruner.max_resource): the last epoch would not validate"),
    # The space's end with the fewest batches binds: its count is the one to keep to (the
    # low end's 45 was advised, then refused at the high end).
    ("check-validation-beyond-the-fewest-batches",
     {"trainer": {"max_epochs": 2, "val_check_interval": 50}}, ["--check"],
     "trainer.val_check_interval: is 50, but an epoch has 12 training batches: give at most "
     "12, or a fraction of an epoch (e.g. 0.5) (the space's high end, data.batch_size 128)"),
    # A split scikit-learn's stratification refuses: --check said OK, every trial failed.
    ("check-split-leaves-no-training", {"data": {"name": "digits", "val_fraction": 0.9995}},
     ["--check"], "data.val_fraction: is 0.9995, which leaves 0 of the 1797 digits for "
     "training, but a stratified split needs at least one of each of the 10 classes on each "
     "side: give from 0.0051 to 0.9944"),
    ("split-too-few-to-validate", {"data": {"name": "digits", "val_fraction": 0.001}}, [],
     "data.val_fraction: is 0.001, which leaves 2 of the 1797 digits for validation, but a "
     "stratified split needs at least one of each of the 10 classes on each side: give from "
     "0.0051 to 0.9944"),
    ("check-split-at-the-space-high-end",
     {"space": {"lr": {"loguniform": [0.01, 1.0]}, "val_fraction": {"uniform": [0.2, 0.9995]}},
      "initial": []}, ["--check"],
     "space.val_fraction: the high end 0.9995 is refused: is 0.9995, which leaves 0 of the "
     "1797 digits for training"),
    ("validation-interval-zero", {"trainer": {"max_epochs": 2, "val_check_interval": 0}}, [],
     "trainer.val_check_interval: is 0, but must be an integer >= 1 (batches)"),
    ("trainer-barebones", {"trainer": {"max_epochs": 2, "barebones": True}}, [],
     "trainer.barebones: is set by the launcher"),
    ("no-training-batch", {"trainer": {"max_epochs": 2, "limit_train_batches": 0}}, [],
     "trainer.limit_train_batches: is 0, but a trial must train"),
    # A pausing schedule ranks trials by the value of the epoch they paused after: every trial
    # trained its first segment and then failed ("never logged") when that epoch did not validate.
    ("validation-off-the-rungs", {
        "trainer": {"check_val_every_n_epoch": 2, "limit_train_batches": 4,
                    "limit_val_batches": 2},
        "pruner": {"name": "asha", "mode": "promotion", "min_resource": 1, "max_resource": 9,
                   "reduction_factor": 3}}, [],
     "trainer.check_val_every_n_epoch: validates every 2 epochs, but trials pause at epochs 1, "
     "3, 9 and are ranked there by that epoch's value: use 1, or rungs that are multiples of 2"),
    ("study-escapes-run-dir", {"study": "../../etc"}, [], "study: is '../../etc'"),
    ("unreachable-postgres", {"storage": f"postgresql+psycopg2://hpo:{SECRET}@127.0.0.1:1/db"},
     [], "storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db"),
    ("password-in-other-error", {"storage": f"postgresql://hpo:{SECRET}@127.0.0.1:1/db",
                                 "direction": "sideways"}, [], "direction: is 'sideways'"),
    ("bad-set-syntax", {}, ["--set", "stop.n_trials"], "--set: 'stop.n_trials' must look like"),
    ("bad-set-value", {}, ["--set", "stop.n_trials=[1"], "--set stop.n_trials: cannot parse"),
    ("set-into-scalar", {}, ["--set", "study.name=x"], "--set study.name: 'study' is not a"),
    # The config file itself.
    ("config-not-utf8", b"study: t\nmodel: {name: lenet}  # caf\xe9 latin-1\n", [],
     "config.yaml is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8"),
    ("config-is-a-folder", None, ["."], "config: cannot read .: Is a directory"),
    ("config-yaml-scalar", "just some words\n", [], "must hold a mapping of fields, got str"),
    ("config-nul-byte", "study: t\x00\n", [],
     "is not valid YAML at character 9: unacceptable character #x0000"),
    ("config-key-twice", "study: t\nmodel: {name: lenet}\nstudy: u\n", [],
     "is not valid YAML at line 3, column 1: key 'study' is given twice (first on line 1)"),
    # Storage: checked (read-only) before anything is written.
    ("storage-not-a-journal", {"storage": "config.yaml"}, [],
     "storage: config.yaml is not an Optuna journal file"),
    ("storage-is-a-device", {"storage": "/dev/null"}, [],
     "storage: /dev/null is not a regular file (a device or a pipe), so not a journal file"),
    ("storage-is-a-folder", {"storage": "/usr"}, [],
     "storage: /usr is a folder, not a journal file"),
    ("storage-is-a-folder-above-the-run-folder", {"storage": "."}, [],
     "storage: . is the run folder /"),
    ("storage-under-a-file", {"storage": "config.yaml/t.journal"}, [],
     "storage: cannot create config.yaml/t.journal: config.yaml is a file, not a folder"),
    ("storage-folder-cannot-be-made", {"storage": "/proc/nope/t.journal"}, [],
     "storage: cannot create /proc/nope"),
    ("sqlite-not-a-database", {"storage": "sqlite:///config.yaml"}, [],
     "storage: sqlite:///config.yaml is not an SQLite database (file is not a database)"),
    ("sqlite-under-a-file", {"storage": "sqlite:///config.yaml/t.db"}, [],
     "storage: cannot create sqlite:///config.yaml/t.db: config.yaml is a file, not a folder"),
    ("sqlite-in-memory", {"storage": "sqlite:///:memory:"}, [],
     "storage: in-memory SQLite is not shared with the worker processes"),
    ("storage-unknown-scheme", {"storage": f"mongodb://hpo:{SECRET}@127.0.0.1:1/db"}, [],
     "storage: cannot open mongodb://hpo:***@127.0.0.1:1/db: Can't load plugin"),
    ("postgres-default-driver", {"storage": f"postgresql://hpo:{SECRET}@127.0.0.1:1/db"}, [],
     "storage: cannot open postgresql://hpo:***@127.0.0.1:1/db: "),
    ("postgres-driver-not-installed", {"storage": f"postgresql+pg8000://hpo:{SECRET}@127.0.0.1:1/db"},
     [], "; install the driver, or name an installed one in the URL"),
    # The run folder: made and written (a test file) before the study is created.
    ("run-dir-cannot-be-made", {"run_dir": "/proc/nope"}, [],
     "run_dir: cannot create /proc/nope/t: "),
    ("run-dir-under-a-file", {"run_dir": "config.yaml/runs"}, [],
     "run_dir: cannot create config.yaml/runs/t: config.yaml is a file, not a folder"),
    ("run-dir-study-folder-is-a-file", {"run_dir": ".", "study": "config.yaml"}, [],
     "run_dir: config.yaml is a file, not a folder"),
    # --check looks at the storage and the folders too, writing nothing.
    ("check-unreachable-postgres",
     {"storage": f"postgresql+psycopg2://hpo:{SECRET}@127.0.0.1:1/db"}, ["--check"],
     "storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db: connection to server"),
    ("check-unreachable-postgres-query-password",
     {"storage": f"postgresql+psycopg2://hpo@127.0.0.1:1/db?password={SECRET}"}, ["--check"],
     "storage: cannot open postgresql+psycopg2://hpo@127.0.0.1:1/db?password=***: connection "
     "to server"),
    ("journal-named-as-a-database", {"storage": "runs/t.db"}, [],
     "storage: runs/t.db would be a new journal file (a plain path names one), but its name is "
     "an SQLite database's: give sqlite:///runs/t.db for SQLite"),
    ("check-not-a-journal", {"storage": "config.yaml"}, ["--check"],
     "storage: config.yaml is not an Optuna journal file"),
    ("check-sqlite-not-a-database", {"storage": "sqlite:///config.yaml"}, ["--check"],
     "storage: sqlite:///config.yaml is not an SQLite database"),
    ("check-run-dir-under-a-file", {"run_dir": "config.yaml/runs"}, ["--check"],
     "run_dir: cannot create config.yaml/runs/t: config.yaml is a file, not a folder"),
    ("check-run-dir-in-proc", {"run_dir": "/proc/nope"}, ["--check"],
     "run_dir: cannot create /proc/nope/t: "),
    # A storage file where the run folder goes: --check said OK, the run then failed.
    ("storage-is-the-run-dir", {"storage": "runs", "run_dir": "runs"}, [],
     "storage: runs is the run folder runs/t or a folder above it (run_dir: runs); give the "
     "storage file a name of its own, e.g. runs/t.journal"),
    ("check-storage-is-the-study-folder", {"storage": "sqlite:///runs/t", "run_dir": "runs"},
     ["--check"], "storage: runs/t is the run folder runs/t (run_dir: runs)"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fields", "args", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input(tmp_path: Path, fields: dict | str | bytes | None, args: list[str],
                   expected: str) -> None:
    config: list[str] = []
    if isinstance(fields, bytes):
        (tmp_path / "config.yaml").write_bytes(fields)
        config = [str(tmp_path / "config.yaml")]
    elif isinstance(fields, str):
        (tmp_path / "config.yaml").write_text(fields)
        config = [str(tmp_path / "config.yaml")]
    elif fields is not None:
        config = [str(config_file(tmp_path, **{**ONE_SLOT, **fields}))]
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


@pytest.mark.slow
def test_config_files_are_read_with_the_safe_loader(tmp_path: Path) -> None:
    text = yaml.safe_dump({"study": "t"}) + "x: !!python/name:os.system ''\n"
    (tmp_path / "c.yaml").write_text(text)
    result = launch(str(tmp_path / "c.yaml"), cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "not valid YAML" in result.stderr


# ------------------------------------------------------------------------------------------
# Nothing written to a study that already exists, by a bad run or a refused one.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("directions", "fields", "expected"),
    [
        pytest.param(["minimize"], {"run_dir": "/proc/nope"},
                     "run_dir: cannot create /proc/nope/t", id="run-dir-cannot-be-made"),
        pytest.param(["minimize"], {"direction": "maximize"},
                     "direction: is maximize, but study 't' was created to minimize",
                     id="other-direction"),
        pytest.param(["minimize", "minimize"], {},
                     "direction: lists 1 objective(s), but study 't' was created with 2 "
                     "(minimize, minimize)", id="multi-objective"),
        pytest.param(["minimize"], {"metric": ["validation_error", "parameters"],
                                    "direction": ["minimize", "minimize"]},
                     "direction: lists 2 objective(s), but study 't' was created with 1 "
                     "(minimize)", id="several-objectives-on-a-single-objective-study"),
        pytest.param(["minimize", "maximize"], {"metric": ["validation_error", "parameters"],
                                                "direction": ["minimize", "minimize"]},
                     "direction: is ['minimize', 'minimize'], but study 't' was created to "
                     "['minimize', 'maximize']", id="other-directions"),
        pytest.param([], {}, "t.journal is not a valid Optuna journal file: Expecting value",
                     id="garbage-inside-the-journal"),  # found after the folders: they go
    ],
)
def test_an_existing_study_is_left_as_it_was(tmp_path: Path, directions: list[str],
                                             fields: dict, expected: str) -> None:
    journal = tmp_path / "t.journal"
    if directions:
        optuna.create_study(study_name="t", storage=open_storage(str(journal)),
                            directions=directions)
    else:
        _journal_with_garbage_inside(tmp_path)
    before = journal.read_bytes()
    result = launch(str(config_file(tmp_path, **{**ONE_SLOT, **fields})), cwd=tmp_path,
                    timeout=180)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert journal.read_bytes() == before  # no ticket queued, no record appended
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "t.journal"]


# ------------------------------------------------------------------------------------------
# A full disk, for real: a tmpfs filled to the last byte (needs root to mount; skipped without).


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs with no byte free, mounted under ``tmp_path``."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        handle = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(handle, bytes(4096)):
                pass
        except OSError as error:
            assert error.errno == errno.ENOSPC
        finally:
            os.close(handle)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_is_found_before_the_study_is_created(tmp_path: Path,
                                                          full_disk: Path) -> None:
    config = str(config_file(tmp_path, run_dir=str(full_disk / "runs")))
    runs = full_disk / "runs" / "t"
    for args, expected in (
        ((), f"run_dir: cannot write in {runs}: No space left on device (a 64 KiB test file)"),
        (("--check",), f"run_dir: cannot create {runs}: 0 KiB free on the file system of "
                       f"{full_disk}; 64 KiB or more needed"),
    ):
        result = launch(config, *args, cwd=tmp_path, timeout=180)
        assert result.returncode == 2, result.stderr[-2000:]
        assert result.stderr.strip().splitlines() == [f"error: {expected}"]
        assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no runs/ left
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "full"]


# ------------------------------------------------------------------------------------------
# prepare_folders: the run folder and the storage's folder, made and written before the study.


def test_prepare_folders_makes_and_probes_the_folders(tmp_path: Path) -> None:
    cfg = load_config(config_file(tmp_path, run_dir=str(tmp_path / "a" / "b"),
                                  storage=str(tmp_path / "s" / "t.journal")))
    assert launcher.prepare_folders(cfg, write=False) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # looked only
    made = launcher.prepare_folders(cfg)
    assert set(made) == {tmp_path / "s", tmp_path / "a", tmp_path / "a" / "b",
                         tmp_path / "a" / "b" / "t"}
    assert all(made.index(p) < made.index(p.parent) for p in made if p.parent in made)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [tmp_path / "config.yaml"]
    launcher.remove_folders(made)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_a_full_disk_fails_the_probe_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tmpfs test above does this for real where it can mount; here the probe's write
    fails the way a full disk makes it fail."""

    def full(folder: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(launcher, "_write_probe", full)
    cfg = load_config(config_file(tmp_path, run_dir=str(tmp_path / "runs")))
    with pytest.raises(ConfigError) as info:
        launcher.prepare_folders(cfg)
    assert str(info.value) == (f"run_dir: cannot write in {tmp_path / 'runs' / 't'}: "
                               "No space left on device (a 64 KiB test file)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_a_bad_storage_folder_removes_the_run_folder_it_made(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a file")
    cfg = load_config(config_file(tmp_path, run_dir=str(tmp_path / "runs"),
                                  storage=str(tmp_path / "f" / "t.journal")))
    with pytest.raises(ConfigError, match=r"^storage: /\S+/f is a file, not a folder$"):
        launcher.prepare_folders(cfg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "f"]


def test_the_probe_writes_and_deletes_its_file(tmp_path: Path) -> None:
    launcher._write_probe(tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        launcher._write_probe(tmp_path / "missing")
