"""The public surface: every name in ``__all__`` resolves, and light imports stay light."""

from __future__ import annotations

import subprocess
import sys

import lightning_hpo


def test_all_names_resolve_lazily() -> None:
    assert sorted(lightning_hpo.__all__) == sorted(lightning_hpo._EXPORTS)
    for name in lightning_hpo.__all__:
        assert getattr(lightning_hpo, name) is not None, name


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        lightning_hpo.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("expected AttributeError")


def test_pure_modules_do_not_import_torch() -> None:
    code = "import lightning_hpo.rungs, lightning_hpo.errors, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
