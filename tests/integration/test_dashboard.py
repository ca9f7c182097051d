"""Real clients read our studies: ``optuna-dashboard`` over HTTP and the ``optuna`` CLI, on an
SQLite database and on a journal file built in-process with the attrs the launcher writes.

optuna-dashboard takes a journal file path as its storage argument (``_storage_url.py``: an
existing file without the SQLite header is opened as a ``JournalFileBackend``), and so does
the ``optuna`` CLI (``cli._get_storage``: ``os.path.isfile`` -> ``JournalFileBackend``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers.report_support import SCENARIO, make_launcher_study, make_mo_study
from helpers.support import free_port
from optuna.trial import TrialState

from lightning_hpo.schema import ATTR, objective_curve

pytestmark = pytest.mark.slow  # starts real processes (a server, CLI interpreters)
BIN = Path(sys.executable).parent
STUDY = "demo"
_START_TIMEOUT_S = 180


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("journal", id="journal")])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, optuna.Study]:
    """(storage spec as a user types it, the study) for one kind of storage."""
    if request.param == "sqlite":
        spec = f"sqlite:///{tmp_path / 'demo.db'}"
    else:
        spec = str(tmp_path / "demo.journal")
    study = make_launcher_study(spec, STUDY)
    make_launcher_study(spec, "other", running=False, waiting=0)
    return spec, study


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (127.0.0.1 only)
        return json.loads(response.read())


def _executable(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in this environment ({path})")
    return path


@pytest.fixture
def dashboard(stored: tuple[str, optuna.Study], tmp_path: Path) -> Iterator[str]:
    """``optuna-dashboard STORAGE`` on 127.0.0.1 and a free port; yields its base URL."""
    spec, _ = stored
    make_mo_study(spec, "several")  # a study with two objectives beside them
    port = free_port()
    log = (tmp_path / "dashboard.log").open("w")
    process = subprocess.Popen(
        [str(_executable("optuna-dashboard")), spec, "--host", "127.0.0.1", "--port", str(port),
         "--server", "wsgiref"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        limit = time.time() + _START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise AssertionError("optuna-dashboard exited: "
                                     + (tmp_path / "dashboard.log").read_text()[-2000:])
            try:
                _get(f"{base}/api/meta")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.time() > limit:
                    raise AssertionError("optuna-dashboard did not answer in time") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def test_dashboard_lists_the_study_with_its_trials(
    dashboard: str, stored: tuple[str, optuna.Study]
) -> None:
    _, study = stored
    summaries = _get(f"{dashboard}/api/studies")["study_summaries"]
    by_name = {s["study_name"]: s for s in summaries}
    assert set(by_name) == {STUDY, "other", "several"}
    assert by_name[STUDY]["directions"] == ["minimize"]
    detail = _get(f"{dashboard}/api/studies/{by_name[STUDY]['study_id']}")
    trials = {t["number"]: t for t in detail["trials"]}
    assert len(trials) == len(study.trials) == len(SCENARIO) + 1 + 2  # + running + waiting
    for frozen in study.trials:
        served = trials[frozen.number]
        assert served["state"] == frozen.state.name.capitalize()
        steps = {v["step"]: v["value"] for v in served["intermediate_values"]}
        assert steps == frozen.intermediate_values
        attrs = {a["key"]: a["value"] for a in served["user_attrs"]}
        if frozen.state != TrialState.WAITING:
            assert attrs[ATTR.SLOT] == str(frozen.user_attrs[ATTR.SLOT])
            assert attrs[ATTR.DEVICE] == frozen.user_attrs[ATTR.DEVICE]
        if frozen.state.is_finished():
            assert json.loads(attrs[ATTR.EPOCH_END_TIMES]) == pytest.approx(
                frozen.user_attrs[ATTR.EPOCH_END_TIMES])
    (best,) = detail["best_trials"]
    assert best["number"] == study.best_trial.number
    assert best["values"] == [pytest.approx(study.best_value)]
    assert detail["has_intermediate_values"] is True


def test_dashboard_serves_a_multi_objective_study_and_its_pareto_front(
    dashboard: str, stored: tuple[str, optuna.Study]
) -> None:
    """The dashboard's Pareto front view: its directions, metric names and best trials (the
    front), and each trial's per-epoch values as the user attribute the report reads."""
    spec, _ = stored
    study = optuna.load_study(study_name="several", storage=_storage(spec))
    summaries = _get(f"{dashboard}/api/studies")["study_summaries"]
    summary = next(s for s in summaries if s["study_name"] == "several")
    assert summary["directions"] == ["minimize", "minimize"]
    detail = _get(f"{dashboard}/api/studies/{summary['study_id']}")
    assert detail["objective_names"] == study.metric_names  # its name for metric_names
    assert {t["number"] for t in detail["best_trials"]} == {t.number for t in study.best_trials}
    assert detail["best_trials"]
    served = {t["number"]: t for t in detail["trials"]}
    for frozen in study.trials:
        attrs = {a["key"]: a["value"] for a in served[frozen.number]["user_attrs"]}
        rows = json.loads(attrs[ATTR.OBJECTIVE_VALUES])
        assert {row[0]: tuple(row[1:]) for row in rows} == objective_curve(frozen)
        if frozen.state == TrialState.COMPLETE:
            assert served[frozen.number]["values"] == pytest.approx(frozen.values)


def _storage(spec: str) -> Any:
    from lightning_hpo.storage import open_storage

    return open_storage(spec)


def _optuna_cli(*args: str) -> Any:
    result = subprocess.run(
        [str(_executable("optuna")), *args, "-f", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_optuna_cli_reads_the_study(stored: tuple[str, optuna.Study]) -> None:
    spec, study = stored
    studies = _optuna_cli("studies", "--storage", spec)
    assert sorted(s["name"] for s in studies) == [STUDY, "other"]
    best = _optuna_cli("best-trial", "--study-name", STUDY, "--storage", spec)
    assert best["number"] == study.best_trial.number
    assert best["value"] == pytest.approx(study.best_value)
    assert best["user_attrs"][ATTR.EPOCHS] == study.best_trial.user_attrs[ATTR.EPOCHS]
    trials = _optuna_cli("trials", "--study-name", STUDY, "--storage", spec)
    assert [t["number"] for t in trials] == [t.number for t in study.trials]
    assert [t["state"] for t in trials] == [t.state.name for t in study.trials]
