"""The study side of the launcher: one study, its trials' records, and what runs next.

* :mod:`~lightning_hpo.launch.study.search`: what decides: the config's sampler, pruner and
  pausing schedule;
* :mod:`~lightning_hpo.launch.study.creation`: the study created once, the trial budget queued,
  the study locks (:func:`~lightning_hpo.launch.study.creation.open_study`);
* :mod:`~lightning_hpo.launch.study.trials`: a trial's records: claim, owner, pause, segments,
  end, a crashed worker's trials handed back; the one writer of them;
* :mod:`~lightning_hpo.launch.study.scheduler`: which segment a free slot trains next (pausing
  schedules, crash resume).

Every process reads and writes the same storage: nothing here lives only in memory.
"""
