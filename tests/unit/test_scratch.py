"""``lightning_hpo._scratch``: temporary folders named after their process, removed by the
launcher when that process was killed before it could (the launcher end to end:
test_journal_lock.py's killed worker)."""

from __future__ import annotations

import os
from pathlib import Path

from lightning_hpo._scratch import remove_scratch_of, scratch_prefix


def test_the_prefix_names_the_purpose_and_this_process() -> None:
    assert scratch_prefix("check") == f"lightning-hpo-check-{os.getpid()}-"


def test_only_that_process_s_folders_are_removed(tmp_path: Path) -> None:
    mine = [tmp_path / "lightning-hpo-check-123-abcd", tmp_path / "lightning-hpo-ddp-123-x-y"]
    others = [tmp_path / "lightning-hpo-check-1234-abcd",  # another pid, same digits first
              tmp_path / "lightning-hpo-check-12-abcd",
              tmp_path / "other-check-123-abcd"]
    for folder in mine + others:
        folder.mkdir()
        (folder / "inside").write_text("x")
    (tmp_path / "lightning-hpo-file-123-abcd").write_text("a file, not a folder")
    (tmp_path / "lightning-hpo-link-123-abcd").symlink_to(others[0])
    removed = remove_scratch_of(123, root=tmp_path)
    assert sorted(removed) == sorted(mine[:1])  # "ddp-123-x-y": its pid is not second to last
    assert not mine[0].exists() and mine[1].exists()
    assert all(folder.is_dir() for folder in others)
    assert (tmp_path / "lightning-hpo-file-123-abcd").is_file()
    assert (tmp_path / "lightning-hpo-link-123-abcd").is_symlink()
    assert (others[0] / "inside").exists()


def test_nothing_to_remove_is_fine(tmp_path: Path) -> None:
    assert remove_scratch_of(123, root=tmp_path) == []
    assert remove_scratch_of(123, root=tmp_path / "missing") == []
