"""``lightning_hpo.create_study`` under DDP: several ``optimize`` calls, several studies, errors.

The process tests run ``tests/helpers/ddp_optimize_script.py`` as a real 2-process job (CPU,
gloo) on in-memory, journal and SQLite storage; the error encoding and the opening of storage
specs (journal paths, bad URLs, missing files, a follower reading the study) are tested directly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from helpers.support import HELPERS, REPO, ddp_clean_env, run_job
from optuna.storages.journal import JournalFileBackend

import lightning_hpo as hpo
from lightning_hpo._optuna import trial_id_of
from lightning_hpo.distributed._channel import LeaderError, decode_error, encode_error
from lightning_hpo.errors import ConfigError

ROOT = REPO
_SCRIPT = HELPERS / "ddp_optimize_script.py"
_TIMEOUT_S = 300  # a hang is the bug under test: fail it, do not wait forever


class _Custom(Exception):
    def __init__(self, code: int, where: str) -> None:
        super().__init__(f"code {code} at {where}")


def _run_job(kind: str, out_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run the script; return once *every* rank is gone (rank 1 shares the output pipes)."""
    env = ddp_clean_env(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return run_job([sys.executable, str(_SCRIPT), kind, str(out_dir), *extra],
                   cwd=out_dir, env=env, timeout=_TIMEOUT_S)


def _rows(out_dir: Path, rank: int) -> list[dict]:
    path = out_dir / f"rank{rank}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "journal", "sqlite"])
def test_several_optimize_calls_and_studies_follow_rank_zero(kind: str, tmp_path: Path) -> None:
    """optimize(2), optimize(1), a second study with a caught failure, then an uncaught one.

    On main before the fix, the second ``optimize`` hung: rank 1 replayed trial 0 from its
    environment while rank 0 announced trial 2.
    """
    result = _run_job(kind, tmp_path)
    log = result.stderr[-4000:]
    zero, one = _rows(tmp_path, 0), _rows(tmp_path, 1)
    expected = [("first", 0), ("first", 1), ("first", 2),
                ("second", 0), ("second", 1), ("second", 2)]
    assert [(r["study"], r["trial"]) for r in zero] == expected, log
    assert zero == one, "the ranks trained different trials or hyperparameters"
    assert all(r["layer_width"] == r["params"]["num_hiddens_1"] for r in one)
    assert all(r["epochs"] == 2 for r in zero)
    assert len({r["params"]["num_hiddens_1"] for r in zero}) >= 2  # a shape did change

    studies = json.loads((tmp_path / "studies.json").read_text())
    assert [t["state"] for t in studies["first"]] == ["COMPLETE"] * 3  # exactly 2 + 1 trials
    assert [t["state"] for t in studies["second"]] == ["FAIL", "COMPLETE"]  # caught, went on
    recorded = {(name, t["number"]): t["params"] for name in studies for t in studies[name]}
    for row in zero:
        if (row["study"], row["trial"]) in recorded:
            assert recorded[(row["study"], row["trial"])] == row["params"]

    # The last optimize raised on rank 0 only, outside `catch`: every rank ends with the error.
    assert result.returncode != 0
    for rank in (0, 1):
        assert (tmp_path / f"error{rank}.txt").read_text() == "ValueError: boom in second trial 2"
    assert "[rank1]: ValueError: boom in second trial 2" in result.stderr
    if kind != "memory":
        storage = (f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else
                   optuna.storages.JournalStorage(
                       optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.journal"))))
        second = optuna.load_study(study_name="second", storage=storage)
        assert [t.state.name for t in second.trials] == ["FAIL", "COMPLETE", "FAIL"]


@pytest.mark.slow
def test_error_inside_fit_on_rank_zero_reaches_every_rank(tmp_path: Path) -> None:
    """Rank 0 raises mid-epoch while rank 1 waits in a gradient all-reduce: no rank hangs."""
    result = _run_job("memory", tmp_path, "--raise-in-fit")
    assert result.returncode != 0
    for rank in (0, 1):
        error = (tmp_path / f"error{rank}.txt").read_text()
        assert error == "ValueError: boom inside fit on rank 0"
    assert [(r["study"], r["trial"]) for r in _rows(tmp_path, 1)] == [("first", 0)]


@pytest.mark.slow
@pytest.mark.parametrize("caught", [False, True], ids=["uncaught", "caught"])
@pytest.mark.parametrize("rank", [0, 1])
def test_an_error_inside_fit_on_any_rank_ends_optimize_on_every_rank(
    tmp_path: Path, rank: int, caught: bool
) -> None:
    """A trial raises inside ``fit`` on one rank while the other waits in a collective for it.
    On rank 1 the job hung for ever (rank 1 swallowed the error and waited for rank 0's next
    trial; rank 0 waited in the all-reduce), and so did rank 0's error under ``catch`` (rank 0
    went on to a trial that rank 1, still in the old collective, could not join). The trial is
    recorded FAIL with the error of the rank it was raised on, and ``optimize`` ends with it,
    ``catch`` or not: the ranks' collectives no longer match."""
    flags = [f"--raise-in-fit={rank}", *(["--caught"] if caught else [])]
    result = _run_job("journal", tmp_path, *flags)
    assert result.returncode != 0, result.stderr[-4000:]
    message = f"ValueError: boom inside fit on rank {rank}"
    assert (tmp_path / "error0.txt").read_text() == message, result.stderr[-4000:]
    if rank == 1:  # it handed its error to rank 0, said so and left the job
        assert "lightning_hpo: trial 1 failed on rank 1" in result.stderr
    else:
        assert (tmp_path / "error1.txt").read_text() == message
    journal = JournalFileBackend(str(tmp_path / "study.journal"))
    trials = optuna.load_study(study_name="first",
                               storage=optuna.storages.JournalStorage(journal)).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "FAIL"]  # no second trial began
    assert [(r["study"], r["trial"]) for r in _rows(tmp_path, 1)] == [("first", 0)]


@pytest.mark.parametrize(
    ("error", "rebuilt"),
    [
        pytest.param(ValueError("boom"), ValueError("boom"), id="builtin"),
        pytest.param(optuna.exceptions.StorageInternalError("db gone"),
                     optuna.exceptions.StorageInternalError("db gone"), id="library-class"),
        pytest.param(KeyError("lr"), KeyError("lr"), id="key-error-repr-text"),
        pytest.param(_Custom(3, "epoch 2"), LeaderError(f"{__name__}:_Custom: code 3 at "
                                                        "epoch 2"), id="args-do-not-rebuild"),
        pytest.param(ValueError(object()), None, id="args-not-json"),
    ],
)
def test_errors_travel_as_json_and_rebuild_or_fall_back(
    error: BaseException, rebuilt: BaseException | None
) -> None:
    data = json.loads(json.dumps(encode_error(error)))
    result = decode_error(data)
    if rebuilt is None:
        assert isinstance(result, LeaderError)
        assert "builtins:ValueError: <object object" in str(result)
        return
    assert type(result) is type(rebuilt)
    assert str(result) == str(rebuilt)


def test_decode_refuses_what_is_not_an_exception_class() -> None:
    for data in ({"type": "os:system", "args": ["true"], "text": "x"},
                 {"type": "builtins:int", "args": [1], "text": "1"},
                 {"type": "no.such.module:Error", "args": [], "text": "gone"}):
        assert isinstance(decode_error(data), LeaderError), data


# --- storage specs: create_study / load_study open strings as the launcher does ---


def _square(trial: optuna.Trial) -> float:
    return trial.suggest_float("x", -1.0, 1.0) ** 2


def test_optimize_refuses_n_jobs_above_1_even_without_ddp() -> None:
    """The README says so where create_study is introduced: the ranks train one trial at a
    time together, so threads are refused before any trial starts (Optuna's own study takes
    them)."""
    study = hpo.create_study(direction="minimize")
    with pytest.raises(ValueError, match=r"The value of `n_jobs` is 2, but must be `n_jobs == 1`"):
        study.optimize(lambda trial: trial.suggest_float("x", 0.0, 1.0), n_trials=2, n_jobs=2)
    assert study.trials == []


def test_create_study_takes_a_journal_file_path(tmp_path: Path) -> None:
    """On main before the fix a string went to ``RDBStorage`` and a journal path was refused."""
    path = tmp_path / "runs" / "ddp.journal"  # its folder does not exist yet either
    study = hpo.create_study(storage=str(path), study_name="j", direction="minimize")
    assert isinstance(study, hpo.DistributedStudy)
    study.optimize(_square, n_trials=2)
    stored = optuna.load_study(
        study_name="j",
        storage=optuna.storages.JournalStorage(JournalFileBackend(str(path))),
    )
    assert [t.state.name for t in stored.trials] == ["COMPLETE", "COMPLETE"]
    again = hpo.load_study(study_name="j", storage=str(path))
    assert [t.params for t in again.trials] == [t.params for t in stored.trials]


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_pathlib_path_is_a_journal_file_and_a_missing_study_is_named(
    kind: str, tmp_path: Path
) -> None:
    """A ``pathlib.Path`` went to Optuna as a storage object (AttributeError: 'PosixPath' object
    has no attribute 'create_new_study'); a study name not there was Optuna's bare
    ``KeyError: 'Record does not exist.'``."""
    storage: object = (tmp_path / "ddp.journal" if kind == "journal"
                       else f"sqlite:///{tmp_path / 'ddp.db'}")
    study = hpo.create_study(storage=storage, study_name="j")  # type: ignore[arg-type]
    study.optimize(_square, n_trials=1)
    assert len(hpo.load_study(study_name="j", storage=storage).trials) == 1  # type: ignore[arg-type]
    hpo.create_study(storage=storage, study_name="k")  # type: ignore[arg-type]
    with pytest.raises(KeyError) as info:
        hpo.load_study(study_name="typo", storage=storage)  # type: ignore[arg-type]
    shown = str(storage) if kind == "journal" else f"sqlite:///{tmp_path / 'ddp.db'}"
    assert info.value.args[0] == f"no study named 'typo' in {shown}; studies there: j, k"


def test_a_bad_storage_url_is_one_config_error_with_the_password_masked() -> None:
    url = "postgresql+psycopg2://hpo:s3cr3t-pw@127.0.0.1:1/db"  # nothing listens on port 1
    with pytest.raises(ConfigError) as info:
        hpo.create_study(storage=url, study_name="x")
    message = str(info.value)
    assert info.value.field == "storage"
    assert message.startswith("storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db")
    assert "s3cr3t-pw" not in message and "\n" not in message


@pytest.mark.parametrize("storage", [123, b"study.db"], ids=["int", "bytes"])
def test_a_storage_of_the_wrong_type_is_one_config_error(storage: object) -> None:
    """It was Optuna's AttributeError ('int' object has no attribute 'create_new_study')."""
    for call in (lambda: hpo.create_study(storage=storage, study_name="x"),
                 lambda: hpo.load_study(study_name="x", storage=storage)):
        with pytest.raises(ConfigError) as info:
            call()
        assert str(info.value) == (
            f"storage: is {storage!r} ({type(storage).__name__}), but must be a journal file "
            "path, an RDB URL (sqlite:///study.db), an Optuna storage object or None (in memory)")


def test_load_study_of_a_missing_sqlite_file_creates_nothing(tmp_path: Path) -> None:
    """On main before the fix ``RDBStorage`` made an empty database at the mistyped path."""
    path = tmp_path / "typo.db"
    with pytest.raises(ConfigError, match="no SQLite database at"):
        hpo.load_study(study_name="x", storage=f"sqlite:///{path}")
    assert not path.exists()


def test_a_follower_reads_rank_zeros_study_from_a_journal_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``optimize``, a follower rank serves ``study.trials`` by loading the study."""
    path = str(tmp_path / "ddp.journal")
    hpo.create_study(storage=path, study_name="j").optimize(_square, n_trials=1)  # rank 0
    monkeypatch.setenv("LOCAL_RANK", "1")
    follower = hpo.create_study(storage=path, study_name="j")
    assert not isinstance(follower, optuna.Study)  # it never wrote to the storage
    assert [t.state.name for t in follower.trials] == ["COMPLETE"]
    in_memory = hpo.create_study(storage="sqlite:///:memory:", study_name="m")
    with pytest.raises(AttributeError, match="only available on rank 0"):
        in_memory.trials  # noqa: B018


@pytest.mark.parametrize("storage", ["journal", "sqlite:///:memory:"])
def test_a_followers_set_up_writes_are_rank_zeros_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    """Every rank runs the script's ``study.enqueue_trial(...)``: on a storage file each rank
    queued a configuration of its own (two trials of one configuration under 2-rank DDP), in
    memory the other ranks raised and DDP killed rank 0. Only rank 0's call writes."""
    spec = str(tmp_path / "ddp.journal") if storage == "journal" else storage
    if storage == "journal":
        hpo.create_study(storage=spec, study_name="j")  # rank 0 made it
        before = Path(spec).read_bytes()
    monkeypatch.setenv("LOCAL_RANK", "1")
    follower = hpo.create_study(storage=spec, study_name="j")
    assert follower.enqueue_trial({"x": 0.5}) is None
    follower.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=1.0))
    follower.set_user_attr("note", "from every rank")
    if storage == "journal":
        assert Path(spec).read_bytes() == before



def test_a_trial_pruned_in_a_spawned_fit_ends_pruned(tmp_path: Path) -> None:
    """``strategy="ddp_spawn"`` runs fit in processes of its own, on copies of the callback:
    its hooks never run in the script's process, and rank 0's copy stores where it stopped the
    trial. ``raise_if_pruned`` in the objective reads that (before, the pruned trial ended
    COMPLETE). Checked by hand with real 2-process ddp_spawn and ddp_fork jobs on SQLite and
    journal storage; a test of them was dropped: torch's spawned ranks now and then die by
    SIGABRT in their teardown after fit, on this machine."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    trial = optuna.create_study(storage=url).ask()
    in_the_script = hpo.PruningCallback(trial, monitor="loss")
    in_the_script.raise_if_pruned()  # nothing stored: goes on
    # what rank 0's copy writes, through a storage of its own
    optuna.storages.RDBStorage(url).set_trial_user_attr(trial_id_of(trial), "pruned_at_epoch", 1)
    with pytest.raises(optuna.TrialPruned, match="pruned at epoch 1"):
        in_the_script.raise_if_pruned()


def test_a_spawned_fit_refuses_a_study_in_the_scripts_memory() -> None:
    """Rank 0 of a fit in processes started for it is a copy (another pid): with Optuna's
    default in-memory study it would report into a copy of the study and lose everything."""
    import lightning as L

    trial = optuna.create_study().ask()
    callback = hpo.PruningCallback(trial, monitor="loss")
    callback._pid = -1  # as in the spawned process: not the process that made it
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", logger=False)
    with pytest.raises(ConfigError) as info:
        callback.on_fit_start(trainer, None)  # type: ignore[arg-type]
    assert str(info.value).startswith(
        "strategy: DDPStrategy (start method spawn) runs fit in processes started for it, which "
        "work on copies of the trial and cannot write to a study held in this process's memory: "
        "give the study a storage they share")


def test_create_studys_trial_is_not_copied_and_says_why() -> None:
    """copy and pickle ask a new object for dunder names before ``__init__`` ran: no
    recursion, a TypeError naming the strategies that copy a trial."""
    import copy
    import pickle

    seen: list[str] = []

    def objective(trial: object) -> float:
        for how in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match="lightning_hpo.create_study's trials are for"):
                how(trial)
            seen.append(how.__name__)
        return 0.0

    hpo.create_study().optimize(objective, n_trials=1)
    assert seen == ["dumps", "copy", "deepcopy"]
