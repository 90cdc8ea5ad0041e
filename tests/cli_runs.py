"""Running ``rumi`` in-process as the CLI tests do: the exit status, stdout and stderr, never a traceback."""

from __future__ import annotations

from xarray_rumi.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err
