"""Run a study from Python: :func:`run` takes a config as a mapping (a notebook) or a file.

``python -m lightning_hpo.launch`` is a thin command line over :func:`launch`; both check
everything (config, model and data, devices, storage, folders) before the study is created or
changed, and raise :class:`~lightning_hpo.errors.ConfigError` naming the field. Where the command
exits non-zero after a run, :func:`run` raises: every trial failed
(:class:`~lightning_hpo.errors.TrialsFailedError`, exit 1), or a signal stopped it (the signal is
delivered again once the trials paused: Ctrl-C is a ``KeyboardInterrupt``, exit 130).

Example::

    import lightning_hpo.launch

    study = lightning_hpo.launch.run({
        "study": "nb", "storage": "runs/nb.journal", "model": {"name": "lenet"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}},
        "pruner": {"name": "sync_sh", "min_resource": 2, "max_resource": 10,
                   "reduction_factor": 2},
        "stop": {"n_trials": 8},
    })
    print(study.best_trial.params)
"""

from __future__ import annotations

import math
import os
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import optuna
from optuna.trial import TrialState
from rich.console import Console

from lightning_hpo.errors import ConfigError, TrialsFailedError, WorkerError
from lightning_hpo.launch.checks import check_against_registry
from lightning_hpo.launch.config import (
    Config,
    apply_overrides,
    load_config,
    parse_config,
    resolve_config,
)
from lightning_hpo.launch.config.changes import Changes
from lightning_hpo.launch.config.cli_spec import DEFAULT_CLI, fit_command
from lightning_hpo.launch.config.slurm import describe, slurm_job, usable_cores
from lightning_hpo.launch.processes.early import EarlyWorkers
from lightning_hpo.launch.processes.folders import (
    check_storage_apart,
    prepare_folders,
    remove_folders,
)
from lightning_hpo.schema import ATTR, is_paused
from lightning_hpo.storage import StorageSpec, mask

if TYPE_CHECKING:
    from lightning_hpo.launch.processes.supervisor import TrialRow

__all__ = ["Outcome", "all_failed", "launch", "run"]


@dataclass(frozen=True)
class Outcome:
    """What :func:`launch` did: the study (None after ``check``), why it stopped, and when
    every trial it ran ended FAIL, the first failure (one line, :func:`all_failed`)."""

    study: optuna.Study | None
    why: str
    failed: str | None = None

    @property
    def stopped_by(self) -> signal.Signals | None:
        """The signal that stopped the run (``why`` is ``"stopped by SIGTERM"``), or None.

        Example::

            >>> Outcome(None, "stopped by SIGTERM").stopped_by, Outcome(None, "checked").stopped_by
            (<Signals.SIGTERM: 15>, None)
        """
        if not self.why.startswith("stopped by "):
            return None
        return signal.Signals[self.why.split()[-1]]


def run(
    config: Mapping[str, Any] | str | Path | None = None,
    overrides: Sequence[str] = (),
    *,
    quiet: bool = True,
) -> optuna.Study:
    """Run a study on every device of this machine, as ``python -m lightning_hpo.launch`` does,
    and return it (an ordinary :class:`optuna.Study`).

    Args:
        config: the config as a mapping (the YAML file's content), a config file, the name of
            a shipped config, or None for the quickstart.
        overrides: ``"key.sub=value"`` strings, as ``--set`` takes them.
        quiet: print only the summary (True), or one line per trial event (False).

    Raises:
        ConfigError: bad input, naming the field; nothing was written to the study.
        WorkerError: the worker checking the config died before it answered.
        TrialsFailedError: the run ran trials and every one ended FAIL (the command's exit 1):
            the message is the command's one line, ``"every trial of this run failed (3 of 3);
            the first, trial 0: RuntimeError: ..."``, and ``error.study`` the study.
        KeyboardInterrupt: Ctrl-C (SIGINT) stopped the run. SIGINT, SIGTERM and SIGUSR1 stop
            it as they stop the command: the running trials pause at their last checkpoint
            (running the same config again resumes them) and the summary is printed; then the
            signal is delivered again to the handler the caller had, so SIGINT raises
            ``KeyboardInterrupt`` and SIGTERM or SIGUSR1 end the process (their default) unless
            the caller handles them. Where the caller's handler returns (or ignores the
            signal), the study is returned.

    Example::

        study = run({"study": "nb", "model": {"name": "lenet"},
                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
                     "pruner": {"name": "asha", "mode": "promotion", "max_resource": 9},
                     "stop": {"n_trials": 20}}, ["stop.n_trials=10"])
    """
    overrides = _override_list(overrides)
    if isinstance(config, Mapping):
        cfg = parse_config(apply_overrides(config, overrides))
    elif config is None or isinstance(config, (str, os.PathLike)):
        cfg = load_config(resolve_config(config), overrides)
    else:
        raise ConfigError("config", (
            f"is {_shown(config)}, but must be a mapping (the YAML file's content), a config "
            "file's path or a shipped config's name"))
    console = Console(highlight=False, markup=False, soft_wrap=True)
    outcome = launch(cfg, console=console, mode="quiet" if quiet else "lines")
    assert outcome.study is not None
    if outcome.stopped_by is not None:  # the supervisor held it back while the trials paused
        signal.raise_signal(outcome.stopped_by)
    if outcome.failed is not None:
        raise TrialsFailedError(outcome.failed, outcome.study)
    return outcome.study


def _override_list(overrides: Any) -> list[str]:
    """:func:`run`'s ``overrides`` as a list of ``key.sub=value`` strings (None: none).

    Raises:
        ConfigError: one string instead of a list of them (each of its characters was read as
            an override), or an item that is not a string.

    Example::

        >>> _override_list(None), _override_list(("stop.n_trials=2",))
        ([], ['stop.n_trials=2'])
        >>> _override_list("stop.n_trials=2")
        Traceback (most recent call last):
        lightning_hpo.errors.ConfigError: overrides: is the string 'stop.n_trials=2', but ...
    """
    if overrides is None:
        return []
    if isinstance(overrides, (str, bytes)):
        raise ConfigError("overrides", f"is the string {overrides!r}, but must be a list of "
                          f"them: [{overrides!r}]")
    if not isinstance(overrides, Sequence):
        raise ConfigError("overrides", f"is {_shown(overrides)}, but must be a list of "
                          "'key.sub=value' strings")
    for item in overrides:
        if not isinstance(item, str):
            raise ConfigError("overrides", f"holds {_shown(item)}, but must hold "
                              "'key.sub=value' strings only")
    return list(overrides)


def _shown(value: Any) -> str:
    """``value`` for a message: its repr, cut short, and its type."""
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({type(value).__name__})"


def launch(
    cfg: Config,
    *,
    console: Console,
    mode: Literal["live", "lines", "quiet"],
    check: bool = False,
    config_file: Path | None = None,
    started: float | None = None,
    early: EarlyWorkers | None = None,
) -> Outcome:
    """Check everything, then create or resume the study and run it to its budget.

    With ``check`` it prints the plan and writes nothing (an existing study's config is
    compared as a run would, on a journal file or a gRPC proxy: :func:`_changes_to_check`).
    Resuming, it says in one line what the config changes that the study goes on with
    (:meth:`~lightning_hpo.launch.config.changes.Changes.line`); a change it cannot go on with is a
    ``ConfigError`` before anything is written.

    ``started`` (unix seconds, default: now) is when the command started: the budget's
    ``stop.max_wallclock_time`` and the summary's time count from it. ``early`` are the workers
    the command started before it validated the config
    (:func:`~lightning_hpo.launch.processes.early. start_early`): the supervisor takes them over
    when they fit the run, else they are stopped and it starts its own; the caller still calls
    their ``abort()`` when this raises (a no-op
    once they were taken over).

    Raises:
        ConfigError: bad input (config, registry, devices, storage, folders), naming the field.
        WorkerError: the worker checking the config died before it answered.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from lightning_hpo.launch.config.devices import detect_devices, machine_memory, plan_slots

    kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
    slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device,
                       memory=machine_memory())
    plan = (f"{len(slots)} slot(s) on {n_devices} {kind} device(s), "
            f"{cfg.devices.per_trial} device(s) per trial")
    job = slurm_job()
    if job is not None:  # what SLURM gave this launcher, in a batch job's output too (--quiet)
        console.print(describe(job, affinity=len(os.sched_getaffinity(0))))
    spec = StorageSpec(cfg.storage)
    if spec.kind == "sqlite-memory":
        raise ConfigError("storage", "in-memory SQLite is not shared with the worker "
                          "processes; use a journal file path or sqlite:///FILE.db")
    check_storage_apart(cfg)  # before the file is looked at: the early workers made run_dir
    # Reads only, never creates the file or the study; a run replays a journal once, later.
    found = spec.check(replay=check)
    made = prepare_folders(cfg, write=not check)
    if check:
        for note in check_against_registry(cfg):  # imports torch and Lightning here
            console.print(note)
        changes = _changes_to_check(cfg, spec, found)
        source = f"; config file {config_file}" if config_file is not None else ""
        console.print(f"config OK: study '{cfg.study}' on {mask(cfg.storage)} ({found}); "
                      f"run folder {cfg.study_dir}; {plan}{source}")
        if changes is not None and changes.line() is not None:
            console.print(changes.line())
        if spec.kind in ("sqlite", "server"):
            console.print("An existing study's stored config is not compared by --check on an "
                          "SQL database (opening Optuna's tables there may write); a run "
                          "compares it before it writes anything.")
        return Outcome(None, "checked")
    from lightning_hpo.launch.processes.supervisor import Supervisor

    # The workers start now (or started before the config was parsed: early) and import torch
    # and Lightning; the first one done checks the config against the real classes, and the
    # study is created or changed only once it said yes.
    sup = Supervisor(cfg, None, slots, kind, n_cores=usable_cores(),
                     started=started)
    try:
        if early is None or not sup.adopt(early):
            if early is not None:  # started for another plan than the run's: not used
                early.abort()
            sup.start_held(check=True)
        from lightning_hpo.launch.status import Display, summary  # meanwhile
        from lightning_hpo.launch.study.creation import config_changes, open_study, study_lock
        from lightning_hpo.launch.study.trials import recover_stale_trials

        for note in sup.await_check():  # what the launcher replaces in a project's config
            console.print(note)
        storage = spec.open()
        study, created = open_study(cfg, storage)
        with study_lock(cfg, storage, "schedule"):
            stale = recover_stale_trials(study, cfg)
    except BaseException as error:
        sup.abort(keep_logs=isinstance(error, WorkerError))  # its log says why it died
        remove_folders(made)
        raise
    sup.attach(study)
    trials = study.get_trials(deepcopy=False)
    paused = sum(is_paused(t) for t in trials)
    done = sum(t.state != TrialState.WAITING for t in trials)
    if mode != "quiet":
        console.print(
            f"{'Created' if created else 'Resuming'} study '{cfg.study}' on {mask(cfg.storage)}"
            f" ({done} trials so far{_resume_words(stale, paused)}); {plan}"
        )
        changed = None if created else config_changes(study, cfg).line()
        if changed is not None:  # what the study goes on with (a refused change never gets here)
            console.print(changed)
    display = Display(cfg, mode, console)
    sup.on_change = display.update
    with display:
        why = sup.run()
    display.update(sup)
    for line in summary(cfg, study, sup, why):
        console.print(line)
    if cfg.cli is not None:
        console.print(_best_config(cfg, study))
    outcome = Outcome(study, why)
    if outcome.stopped_by is None:  # trials a signal paused have not failed
        outcome = Outcome(study, why, all_failed(sup.rows))
    return outcome


def all_failed(rows: Mapping[int, TrialRow]) -> str | None:
    """When the run ran trials and every one ended FAIL: how many, and the first failure's
    reason in one line (its first line, at most 300 characters); else None.

    Example::

        >>> from lightning_hpo.launch.processes.supervisor import TrialRow
        >>> row = TrialRow(3, slot=0, device="cpu:0", state="FAIL", reason="ValueError: bad")
        >>> all_failed({3: row})
        'every trial of this run failed (1 of 1); the first, trial 3: ValueError: bad'
    """
    if not rows or any(row.state != "FAIL" for row in rows.values()):
        return None
    first = min(rows.values(), key=lambda row: (row.ended or math.inf, row.number))
    reason = (first.reason or "no reason recorded").strip().splitlines()[0][:300]
    return (f"every trial of this run failed ({len(rows)} of {len(rows)}); the first, "
            f"trial {first.number}: {reason}")


def _best_config(cfg: Config, study: optuna.Study) -> str:
    """Copy the best trial's ``config.yaml`` to ``run_dir/<study>/best_config.yaml``; the line
    that says so (or why there is none yet)."""
    from lightning_hpo.report.best_config import CONFIG_NAME, write_best_config

    if cfg.several:  # no single best: where the front's configs are
        front = sorted(study.best_trials, key=lambda t: t.number)
        if not front:
            return "No best_config.yaml: no COMPLETE trial yet"
        shown = ", ".join(f"trial {t.number}: {Path(t.user_attrs[ATTR.LOG_DIR]) / CONFIG_NAME}"
                          if isinstance(t.user_attrs.get(ATTR.LOG_DIR), str)
                          else f"trial {t.number}" for t in front[:5])
        more = f" and {len(front) - 5} more" if len(front) > 5 else ""
        return (f"Pareto-optimal trials' configs: {shown}{more} (the report's --best-config "
                "PATH --trial N copies one with its header)")
    try:
        number, path = write_best_config(study, cfg.study_dir / "best_config.yaml")
    except ConfigError as error:
        return f"No best_config.yaml: {error.message}"
    subcommand = study.get_trials(deepcopy=False)[number].user_attrs.get(ATTR.CLI_SUBCOMMAND,
                                                                         "fit")
    command = fit_command(cfg.cli.entry if cfg.cli is not None else DEFAULT_CLI,
                          subcommand=subcommand if isinstance(subcommand, str) else "fit")
    return (f"Best trial's config: {path} (trial {number}; {command} --config "
            f"{shlex.quote(str(path))} retrains it)")


def _changes_to_check(cfg: Config, spec: StorageSpec, found: str) -> Changes | None:
    """``--check`` of an existing study: what the config changes in the study's stored config
    (raises the refusal the run would raise); None where there is no study or it is not read.

    Read on a journal file (replayed by ``spec.check`` anyway) and through a gRPC proxy, whose
    calls only read. Not on an SQL database: Optuna's ``RDBStorage`` creates its tables in a
    database that has none, and ``--check`` writes nothing; there the run compares, before it
    writes anything.
    """
    if spec.kind not in ("journal", "grpc") or found.startswith("new "):
        return None
    from lightning_hpo.launch.study.creation import existing_changes

    return existing_changes(cfg, spec.open(create=False))


def _resume_words(stale: dict[int, str], paused: int) -> str:
    """``", 2 paused to resume, 1 stale failed"``: what a resumed study holds."""
    failed = sum(outcome == "failed" for outcome in stale.values())
    words = [f"{paused} paused to resume"] if paused else []
    if failed:
        words.append(f"{failed} stale failed")
    return "".join(f", {word}" for word in words)
