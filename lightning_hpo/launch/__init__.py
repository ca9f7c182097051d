"""The launcher: ``python -m lightning_hpo.launch CONFIG.yaml``, or :func:`run` from Python.

Modules, one idea each, from the bottom up (each imports only the ones above it in this list):

* ``config``, ``space``: the config file and the search-space grammar (pure, no torch);
* ``changes``: what an existing study's config may change (pure);
* ``search``: what decides, the config's sampler, pruner and pausing schedule;
* ``study``: create the study once, queue the trial budget, the study locks;
* ``trials``: a trial's records: claim, owner, pause, segments, end, crash hand-back;
* ``scheduler``: which segment a free slot trains next (pausing schedules, crash resume);
* ``devices`` (slot planning, pure), ``protocol`` (what supervisor and workers share),
  ``folders`` (run folders checked before anything is written);
* ``worker``: the long-lived trial loop (imports torch); ``supervisor``: spawn, watch,
  restart, stop (no torch); ``status``: the live table and the summary;
* ``runner`` (:func:`run` and :func:`~lightning_hpo.launch.runner.launch`), ``__main__`` (the CLI).

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
