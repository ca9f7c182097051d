"""The gRPC storage proxy (``python -m lightning_hpo.proxy``, ``storage: grpc://host:port``), with
real processes: a proxy process in front of SQLite or PostgreSQL, processes racing through it
and directly on the database (claims, rung records, study locks), launchers behind it, and a
plain Optuna proxy refused with one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers.support import (
    HELPERS,
    config_file,
    env,
    finish,
    free_port,
    launch,
    popen,
    study_of,
    wait_for,
)
from optuna.trial import TrialState

import lightning_hpo
from lightning_hpo import ASHAPruner, HyperbandPruner
from lightning_hpo._optuna import storage_of, trial_id_of
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import load_config
from lightning_hpo.proxy import serve
from lightning_hpo.pruners import open_vector_store, rung_records
from lightning_hpo.schema import ATTR, with_objective_values
from lightning_hpo.storage import StorageSpec, open_storage

pytest.importorskip("grpc")

WORKER = HELPERS / "proxy_worker.py"


# ------------------------------------------------------------------------------------------
# The config: pure (what a grpc:// spec itself is: test_storage.py).


def test_heartbeat_is_refused_through_the_proxy() -> None:
    with pytest.raises(ConfigError, match="^heartbeat: is not carried by the gRPC proxy"):
        load_config("quickstart", ["storage=grpc://localhost:13000", "heartbeat.interval=5"])


# ------------------------------------------------------------------------------------------
# A proxy process in front of SQLite or PostgreSQL.


class Proxy:
    """A running ``python -m lightning_hpo.proxy`` process and the databases behind it."""

    def __init__(self, backend: str, url: str, process: subprocess.Popen[str], port: int) -> None:
        self.backend, self.url, self.process = backend, url, process
        self.spec = f"grpc://127.0.0.1:{port}"

    def stop(self) -> str:
        """SIGTERM; it must stop cleanly (exit 0). Returns its output."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        assert self.process.returncode == 0, out
        return out


def start_proxy(backend: str, url: str, *extra: str) -> Proxy:
    process = subprocess.Popen(
        [sys.executable, "-m", "lightning_hpo.proxy", url, "--host", "127.0.0.1", "--port", "0",
         *extra], env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    found = re.search(r"listening on grpc://127\.0\.0\.1:(\d+)$", line.strip())
    if found is None:
        process.kill()
        raise AssertionError(f"the proxy did not start: {line}{process.communicate()[0]}")
    return Proxy(backend, url, process, int(found.group(1)))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def proxy(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Proxy]:
    """A proxy process in front of a fresh SQLite database or PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'behind.db'}"
    else:
        url = request.getfixturevalue("postgres_server").new_database("proxy")
    running = start_proxy(request.param, url)
    try:
        yield running
    finally:
        out = running.stop()
        assert "Traceback" not in out, out


def race(mode: str, specs: list[str], study: str, folder: Path, n: int = 10) -> list[list[str]]:
    """Run one :mod:`helpers.proxy_worker` per spec at once; each one's output lines."""
    folder.mkdir(exist_ok=True)
    outs = [folder / f"{mode}-{k}.txt" for k in range(len(specs))]
    processes = [
        subprocess.Popen([sys.executable, str(WORKER), mode, spec, study, str(out), str(n)],
                         env=env(), stderr=subprocess.PIPE, text=True)
        for spec, out in zip(specs, outs, strict=True)
    ]
    ready = [folder / f"ready-{out.stem}" for out in outs]
    wait_for(lambda: all(path.exists() for path in ready)
             or any(process.poll() is not None for process in processes),
             timeout=120, what="every racer's study loaded")
    (folder / "go").touch()
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-3000:]
    return [out.read_text().split("\n")[:-1] for out in outs]


def test_the_cli_prints_where_it_listens_and_stops_on_sigterm(proxy: Proxy) -> None:
    out = proxy.stop()
    assert out.splitlines()[-1] == "proxy stopped"


def test_claims_through_the_proxy_and_directly_never_hand_a_trial_twice(
    proxy: Proxy, tmp_path: Path
) -> None:
    study = optuna.create_study(study_name="s", storage=open_storage(proxy.url))
    for _ in range(80):
        study.enqueue_trial({})
    claimed = race("claim", [proxy.spec, proxy.spec, proxy.spec, proxy.url], "s", tmp_path / "c")
    numbers = [int(n) for lines in claimed for n in lines]
    assert sorted(numbers) == list(range(80)), "a trial claimed twice or never"
    assert all(lines for lines in claimed[:3]), "a process through the proxy claimed nothing"
    trials = study_of(proxy.url, "s").get_trials(deepcopy=False)
    assert {t.state for t in trials} == {TrialState.RUNNING}


def test_the_launcher_queues_its_budget_through_the_proxy_in_one_call(
    proxy: Proxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy writes the queue in one transaction (``Enqueue``): no trial is created one by
    one through Optuna's half; a proxy without the call (an older one) gets them one by one."""
    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.study.creation import open_study
    from lightning_hpo.storage._proxy_client import ProxyClient, ProxyStorage

    def cfg(n_trials: int) -> Any:
        return parse_config({"study": "q", "model": {"name": "lenet"}, "storage": proxy.spec,
                             "space": {"lr": {"loguniform": [0.01, 1.0]}},
                             "pruner": {"name": "asha", "max_resource": 3},
                             "initial": [{"lr": 0.5}], "stop": {"n_trials": n_trials}})

    def one_by_one(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a trial created one by one through the proxy")

    with monkeypatch.context() as patch:
        patch.setattr(ProxyStorage, "create_new_trial", one_by_one)
        open_study(cfg(6), open_storage(proxy.spec))
    trials = study_of(proxy.url, "q").get_trials(deepcopy=False)
    assert [(t.number, t.state, t.system_attrs["fixed_params"]) for t in trials] == [
        (0, TrialState.WAITING, {"lr": 0.5})] + [(n, TrialState.WAITING, {}) for n in range(1, 6)]
    monkeypatch.setattr(ProxyClient, "enqueue", lambda self, study_id, params: False)
    open_study(cfg(9), open_storage(proxy.spec))
    trials = study_of(proxy.url, "q").get_trials(deepcopy=False)
    assert [t.number for t in trials] == list(range(9))


def test_rung_records_through_the_proxy_and_directly_are_one_set(
    proxy: Proxy, tmp_path: Path
) -> None:
    optuna.create_study(study_name="s", storage=open_storage(proxy.url))
    ranked = race("rank", [proxy.spec, proxy.spec, proxy.url], "s", tmp_path / "r", n=30)
    direct = rung_records(study_of(proxy.url, "s"))
    through = rung_records(study_of(proxy.spec, "s"))
    assert direct == through
    assert [(r.rung, r.trial_number) for r in direct] == (
        [(1, t) for t in range(90)] + [(3, t) for t in range(90)]
    )
    assert all(r.value == r.trial_number / 1000 for r in direct)
    for lines in ranked:  # each process's own values rise: it sees its earlier ones, all better
        seen = [tuple(int(x) for x in line.split()) for line in lines]
        assert [n_better >= i for i, (_, _, n_better) in enumerate(seen)] == [True] * len(seen)
        assert all(1 <= n <= 90 and n_better < n for _, n, n_better in seen)


def test_study_locks_through_the_proxy_and_directly_exclude_each_other(
    proxy: Proxy, tmp_path: Path
) -> None:
    optuna.create_study(study_name="s", storage=open_storage(proxy.url))
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "counter").write_text("0")
    holds = race("lock", [proxy.spec, proxy.spec, proxy.url], "s", tmp_path / "l", n=15)
    assert (tmp_path / "l" / "counter").read_text() == "45", "an increment was lost"
    spans = sorted(tuple(float(x) for x in line.split()) for lines in holds for line in lines)
    overlaps = [(a, b) for a, b in zip(spans, spans[1:], strict=False) if a[1] > b[0]]
    assert not overlaps, "two holders at once"


def test_a_killed_holder_lets_the_lock_go(proxy: Proxy, tmp_path: Path) -> None:
    optuna.create_study(study_name="s", storage=open_storage(proxy.url))
    folder = tmp_path / "h"
    folder.mkdir()
    (folder / "go").touch()
    holder = subprocess.Popen(
        [sys.executable, str(WORKER), "hold", proxy.spec, "s", str(folder / "hold-0.txt")],
        env=env(), stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    (folder / "counter").write_text("0")
    waiter = subprocess.Popen(
        [sys.executable, str(WORKER), "lock", proxy.url, "s", str(folder / "lock-0.txt"), "1"],
        env=env(), stderr=subprocess.PIPE, text=True,
    )
    time.sleep(3.0)
    assert waiter.poll() is None and (folder / "counter").read_text() == "0", "lock not held"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    _, err = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, err
    assert (folder / "counter").read_text() == "1"


@pytest.mark.parametrize("pruner", ["asha", "hyperband"])
def test_pruning_through_the_proxy_decides_as_on_a_database(
    proxy: Proxy, pruner: str, tmp_path: Path
) -> None:
    """ASHA and Hyperband (its brackets' records) through the proxy: the same decisions and
    the same records as on a database opened directly. (One study name on two databases:
    Hyperband draws a trial's bracket from the study's name.)"""
    direct = f"sqlite:///{tmp_path / 'direct.db'}"

    def run(storage: Any, name: str) -> list[TrialState]:
        study = lightning_hpo.create_study(
            storage=storage, study_name=name,
            pruner=(ASHAPruner(1, max_resource=9, reduction_factor=3) if pruner == "asha"
                    else HyperbandPruner(1, 9, 3)),
            sampler=optuna.samplers.RandomSampler(seed=3))

        def objective(trial: optuna.Trial) -> float:
            x = trial.suggest_float("x", 0, 1)
            for step in range(1, 10):
                trial.report(x / step, step)
                if trial.should_prune():
                    raise optuna.TrialPruned()
            return x / 9

        study.optimize(objective, n_trials=20)
        return [t.state for t in study.get_trials(deepcopy=False)]

    through = run(proxy.spec, "s")
    assert through == run(direct, "s") and TrialState.PRUNED in through
    records = {name: [(r.bracket, r.rung, r.value) for r in rung_records(study_of(url, "s"))]
               for name, url in (("through", proxy.url), ("direct", direct))}
    assert records["through"] == records["direct"] and records["through"]
    if pruner == "hyperband":
        assert len({bracket for bracket, _, _ in records["through"]}) > 1


def test_multi_objective_pruning_through_the_proxy_decides_as_on_a_database(
    proxy: Proxy, tmp_path: Path
) -> None:
    """Several objectives: the values per epoch (a trial user attribute) and the rung records
    (study system attributes) go through Optuna's own proxy service; the decisions and records
    are the ones a database opened directly gives."""
    direct = f"sqlite:///{tmp_path / 'direct.db'}"

    def run(storage: Any) -> list[TrialState]:
        study = lightning_hpo.create_study(
            storage=storage, study_name="mo", directions=["minimize", "maximize"],
            pruner=ASHAPruner(1, max_resource=9, reduction_factor=3),
            sampler=optuna.samplers.RandomSampler(seed=3))
        pruner = study.pruner

        def objective(trial: optuna.Trial) -> tuple[float, float]:
            x, y = trial.suggest_float("x", 0, 1), trial.suggest_float("y", 0, 1)
            for step in range(1, 10):
                values = (x / step, y - x / step)
                trial.set_user_attr(ATTR.OBJECTIVE_VALUES,
                                    with_objective_values(trial, step, values))
                if pruner.prune(study, storage_of(study).get_trial(trial_id_of(trial))):
                    raise optuna.TrialPruned()
            return values

        study.optimize(objective, n_trials=20)
        return [t.state for t in study.get_trials(deepcopy=False)]

    through = run(proxy.spec)
    assert through == run(direct) and TrialState.PRUNED in through
    records = {name: open_vector_store(study_of(url, "mo")).records()
               for name, url in (("through", proxy.url), ("direct", direct))}
    assert records["through"] == records["direct"] and records["through"]


def test_two_launchers_behind_one_proxy_run_the_budget_exactly_once(
    proxy: Proxy, tmp_path: Path
) -> None:
    config = config_file(
        tmp_path, storage=proxy.spec, devices={"accelerator": "cpu", "count": 1},
        pruner={"name": "asha", "min_resource": 1, "max_resource": 3, "reduction_factor": 3},
        stop={"n_trials": 10}, model={"name": "helpers.launch_models:MeetsAnotherLauncher"},
    )
    first = popen(str(config), "--quiet", cwd=tmp_path)
    second = popen(str(config), "--quiet", cwd=tmp_path)
    outs = [finish(first), finish(second)]
    assert first.returncode == 0 and second.returncode == 0, "\n".join(o[-2000:] for o in outs)
    study = study_of(proxy.url)
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == 10 and {t.state for t in trials} <= {TrialState.COMPLETE,
                                                                 TrialState.PRUNED}
    assert len({t.user_attrs["launcher_pid"] for t in trials}) == 2
    records = {(r.rung, r.trial_number): r.value for r in rung_records(study)}
    for trial in trials:  # every rung a trial reached is recorded, with the value it reported
        for rung in (1, 3):
            if rung in trial.intermediate_values and rung < 3:
                assert records[(rung, trial.number)] == trial.intermediate_values[rung]
    assert "Dashboard: optuna-dashboard DATABASE_URL" in outs[0] + outs[1]
    report = subprocess.run(  # the report reads the study through the proxy too
        [sys.executable, "-m", "lightning_hpo.report", "--storage", proxy.spec, "--study", "t"],
        cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    assert f"Study 't' on {proxy.spec}" in report.stdout and "Trials: 10" in report.stdout


# ------------------------------------------------------------------------------------------
# Refusals: one line, exit 2.


def test_a_plain_optuna_proxy_is_refused_in_one_line(tmp_path: Path) -> None:
    from optuna.storages._grpc.server import make_server

    port = free_port()
    server = make_server(optuna.storages.get_storage(open_storage(f"sqlite:///{tmp_path}/p.db")),
                         "127.0.0.1", port)
    server.start()
    try:
        spec = f"grpc://127.0.0.1:{port}"
        with pytest.raises(ConfigError, match="has no lightning_hpo service"):
            StorageSpec(spec).check()
        result = launch(str(config_file(tmp_path, storage=spec)), "--check", cwd=tmp_path,
                        timeout=120)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "python -m lightning_hpo.proxy" in lines[0], lines
    finally:
        server.stop(None)


def test_a_launcher_with_no_proxy_there_says_so(tmp_path: Path) -> None:
    spec = f"grpc://127.0.0.1:{free_port()}"
    result = launch(str(config_file(tmp_path, storage=spec)), cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"storage: cannot open {spec}: no gRPC proxy answers" in lines[0]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("what", "args", "expected"), [
    ("journal", ["runs/a.journal"], "storage: runs/a.journal is a journal file"),
    ("memory", ["sqlite:///:memory:"], "is in-memory SQLite"),
    ("itself", ["grpc://localhost:1"], "is itself a gRPC proxy"),
    ("password", ["postgresql+psycopg2://hpo:s3cr3t-pw@127.0.0.1:1/db"],
     "storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db"),
    ("threads", ["sqlite:///a.db", "--threads", "1"], "threads: must be at least 2"),
])
def test_the_cli_refuses_bad_input_in_one_line(
    tmp_path: Path, what: str, args: list[str], expected: str
) -> None:
    result = subprocess.run([sys.executable, "-m", "lightning_hpo.proxy", *args], cwd=tmp_path,
                            env=env(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert "s3cr3t-pw" not in result.stdout + result.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "a.db").exists()


def test_a_port_in_use_is_a_port_error(tmp_path: Path) -> None:
    server, port = serve(f"sqlite:///{tmp_path}/a.db", host="127.0.0.1", port=0)
    try:
        with pytest.raises(ConfigError, match=f"^port: cannot listen on 127.0.0.1:{port}"):
            serve(f"sqlite:///{tmp_path}/b.db", host="127.0.0.1", port=port)
    finally:
        server.stop(None)


def test_the_proxy_needs_no_tests_folder_on_the_path(tmp_path: Path) -> None:
    """The module runs from any folder with only the package installed."""
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-m", "lightning_hpo.proxy", "--help"],
                            cwd=tmp_path, env=clean, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "example: python -m lightning_hpo.proxy" in result.stdout


def test_a_proxy_gone_mid_run_is_one_line_and_the_same_command_resumes(tmp_path: Path) -> None:
    """The proxy stops while trials train: the launcher says so in one line (exit 1), and once a
    proxy serves the database again on that port the same command finishes the budget exactly."""
    url = f"sqlite:///{tmp_path / 'behind.db'}"
    running = start_proxy("sqlite", url)
    config = config_file(
        tmp_path, storage=running.spec, model={"name": "helpers.launch_models:SlowLeNet"},
        trainer={"max_epochs": 3, "limit_train_batches": 8, "limit_val_batches": 2},
        stop={"n_trials": 6},
    )
    launcher = popen(str(config), "--quiet", cwd=tmp_path, capture_stderr=True)
    wait_for(lambda: any(t.state == TrialState.RUNNING and t.intermediate_values
                         for t in study_of(url).get_trials(deepcopy=False)),
             what="a trial in training")
    running.stop()
    out, err = launcher.communicate(timeout=240)
    assert launcher.returncode == 1, out[-2000:] + err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and f"storage: lost {running.spec} mid-run (UNAVAILABLE" in lines[0]
    assert "run the same command again once it is back" in lines[0]
    again = start_proxy("sqlite", url, "--port", running.spec.rsplit(":", 1)[1])
    try:
        result = launch(str(config), "--quiet", cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        trials = study_of(url).get_trials(deepcopy=False)
        assert len(trials) == 6 and {t.state for t in trials} == {TrialState.COMPLETE}
    finally:
        again.stop()
