"""The launcher: ``python -m lightning_hpo.launch CONFIG.yaml``, or :func:`run` from Python.

Modules, one idea each: ``devices`` (slot planning, pure), ``protocol`` (what supervisor and
workers share), ``study`` (queue, claim and end trials in the storage), ``scheduler`` (which
segment a free slot trains next: pausing schedules, crash resume), ``worker`` (the long-lived
trial loop, imports torch), ``supervisor`` (spawn, watch, restart, stop; no torch), ``status``
(live table and summary), ``folders`` (run folders checked before anything is written),
``runner`` (:func:`run` and :func:`~lightning_hpo.launch.runner.launch`), ``__main__`` (the CLI).

Example::

    import lightning_hpo.launch
    study = lightning_hpo.launch.run("quickstart", ["stop.n_trials=10"])
"""

from __future__ import annotations

from typing import Any

__all__ = ["run"]


def run(*args: Any, **kwargs: Any) -> Any:
    """Run a study from a config mapping or file; see :func:`lightning_hpo.launch.runner.run`."""
    from lightning_hpo.launch.runner import run as run_study

    return run_study(*args, **kwargs)
