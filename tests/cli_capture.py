"""Run the coevo CLI in-process and capture what it prints."""

from __future__ import annotations

import pytest

from coevo.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``coevo ARGV...``."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
