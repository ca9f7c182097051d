"""Trial records after a worker died (:mod:`lightning_hpo.launch.study.trials`), on an in-memory
study: what the study says of a trial is what its worker reported, even when the worker could
not write its segment's end."""

from __future__ import annotations

import time
from pathlib import Path

import optuna
import yaml
from helpers.support import config_file
from optuna.trial import TrialState

from lightning_hpo.launch.config import parse_config
from lightning_hpo.launch.study.trials import crashed
from lightning_hpo.schema import ATTR, Owner, Pause, ResumePoint, Segment


def test_a_trial_killed_after_its_last_epoch_of_a_segment_counts_those_epochs(
    tmp_path: Path,
) -> None:
    """A worker SIGKILLed while training a trial from epoch 2 to 4, after epoch 4's checkpoint
    but before it closed its segment: the trial is paused at 4, and its ``epochs`` say 4 too
    (the worker writes them only at a segment's end), so a trial a schedule ends there is not
    counted as stopped at 2."""
    cfg = parse_config(yaml.safe_load(config_file(tmp_path, pruner={
        "name": "sync_sh", "min_resource": 2, "max_resource": 8, "reduction_factor": 2,
    }, trainer={"limit_train_batches": 2}).read_text()))
    study = optuna.create_study()
    trial = study.ask()
    start = time.time() - 10
    checkpoint = tmp_path / "resume.ckpt"
    checkpoint.write_bytes(b"state")
    owner = Owner(host="gone-host", pid=4242, n=1)
    for epoch, value in ((1, 0.5), (2, 0.4), (3, 0.3), (4, 0.2)):
        trial.report(value, epoch)
    trial.set_user_attr(ATTR.OWNER, owner.token)
    trial.set_user_attr(ATTR.TARGET, 4)
    trial.set_user_attr(ATTR.EPOCHS, 2)  # written when the segment to epoch 2 ended
    trial.set_user_attr(ATTR.EPOCHS_TRAINED, 2)
    trial.set_user_attr(ATTR.EPOCH_END_TIMES, [start - 5, start - 4, start + 3, start + 6])
    trial.set_user_attr(ATTR.SEGMENTS, [
        Segment(start=start - 6, end=start - 4, slot=0, device="cpu:0", from_epoch=0,
                to_epoch=2, how="paused").to_attr(),
        Segment(start=start, end=None, slot=0, device="cpu:0", from_epoch=2).to_attr(),
    ])
    trial.set_user_attr(ATTR.RESUME_POINT, ResumePoint(4, str(checkpoint)).to_attr())

    assert crashed(study, trial.number, "worker was killed by SIGKILL", cfg, owner=owner) == (
        "resumable")
    frozen = study.get_trials(deepcopy=False)[trial.number]
    assert frozen.state == TrialState.RUNNING
    assert Pause.of(frozen).epoch == 4
    assert frozen.user_attrs[ATTR.EPOCHS] == 4
    assert frozen.user_attrs[ATTR.EPOCHS_TRAINED] == 4
    last = Segment.read(frozen.user_attrs[ATTR.SEGMENTS][-1])
    assert (last.from_epoch, last.to_epoch, last.how) == (2, 4, "crashed")
