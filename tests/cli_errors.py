"""The command line's contract for bad input, shared by the CLI test modules (tests only)."""

from __future__ import annotations

from kernelscale.cli import main


def one_error_line(argv, capsys) -> str:
    """Run ``main(argv)``: exit code 2 and exactly one stderr line, no traceback; returned."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kernelscale: error: "), err
    assert "Traceback" not in err
    return lines[0]
