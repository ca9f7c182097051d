"""lightning_hpo._cli: argparse's refusals as one line (the launcher's, the report's, the
proxy's parser)."""

from __future__ import annotations

import pytest

from lightning_hpo._cli import OneLineParser


def _proxy_like() -> OneLineParser:
    parser = OneLineParser(prog="demo")
    parser.add_argument("storage", metavar="STORAGE")
    parser.add_argument("--port", type=int, metavar="PORT")
    return parser


@pytest.mark.parametrize(("argv", "said"), [
    (["--bogus"], "error: unrecognized arguments: --bogus (the options: STORAGE (no flag), "
                  "--port PORT; --help explains them)"),
    (["--storage", "db"], "error: unrecognized arguments: --storage (the options: STORAGE "
                          "(no flag), --port PORT; --help explains them)"),
    ([], "error: the following arguments are required: STORAGE"),
    (["db", "--port", "x"], "error: port: must be a whole number, not 'x'"),
], ids=["unknown-option-alone", "a-positional-given-as-a-flag", "nothing", "bad-value"])
def test_a_refusal_names_the_unknown_option_and_lists_the_positional(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--bogus`` alone read "the following arguments are required: storage", and ``--storage
    db`` was told the options without the positional STORAGE that it meant."""
    with pytest.raises(SystemExit) as exited:
        _proxy_like().parse_args(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [said]
