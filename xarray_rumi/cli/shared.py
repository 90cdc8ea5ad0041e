"""What every ``rumi`` command shares: its help's form, the exit statuses, how to install an extra, its
inputs and outputs.

One rule for each, in every command:

- outputs: ``-o/--output`` names what a command writes (a path, an fsspec
  URL, or ``-`` for standard output); positional arguments are inputs
  (``convert`` also takes its output as the last argument, ``cp``-style).
  An output that would replace an input of the run (the raster, its blob) or
  another output of the same run is refused before any work; the output is
  created but never the folders it goes in; and a file appears whole or not
  at all (:mod:`xarray_rumi.writing.staging`);
- the blob: a command that reads a rumi file reads it with ``--header
  BLOB`` when given, else with ``FILE.header`` when that exists, else it
  rebuilds the blob from the IFD (:func:`blob_for`);
- URLs: ``--storage-options JSON`` goes to fsspec for every FILE, blob and
  output that is a URL, never to a local path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..io.urls import is_local, is_url, local_path

#: Said at the end of every ``--help``.
EXIT_STATUS = ("exit status: 0 done (or the file is valid); 1 invalid, corrupt, unreadable or refused input; "
               "2 usage error or a missing optional dependency; 141 standard output closed early (| head), "
               "as for GNU tools")

#: The status when the reader of standard output leaves early: 128 + SIGPIPE, what a shell reports for a GNU
#: tool stopped that way, so that neither "done" (0) nor "invalid input" (1) is claimed.
READER_GONE = 141

#: The output name that means standard output, in every command.
STDOUT = "-"

#: Said in the help of every output option.
OUTPUT_RULES = "'-' is standard output; missing folders are not created"

#: Said in the help of every ``--header`` option.
BLOB_RULE = "header blob file, path or URL (default: FILE.header when it exists, else rebuilt from the IFD)"


class Refused(Exception):
    """An input or output the command refuses: said in one line, exit status 1."""


class CannotWrite(Exception):
    """An output that could not be written: said as ``cannot write TARGET: why``, exit status 1.

    >>> str(CannotWrite("-", OSError(28, "No space left on device")))
    'cannot write standard output: [Errno 28] No space left on device'
    """

    def __init__(self, target, cause):
        self.target, self.cause = os.fspath(target), cause
        where = "standard output" if self.target == STDOUT else self.target
        super().__init__(f"cannot write {where}: {cause}")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a size, a count), refused as a usage error otherwise.

    >>> positive_int("512")
    512
    >>> positive_int("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a whole number of at least 1, got '0'
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def blob_file(text: str) -> str:
    """An argparse type for ``--header``: a path or URL, never empty (an empty name would be taken for the folder).

    >>> blob_file("a.rumi.header")
    'a.rumi.header'
    >>> blob_file("")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must name a header blob file (a path or URL), got ''
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a header blob file (a path or URL), got {text!r}")
    return text


def add_blob_option(command) -> None:
    """``--header BLOB``, the one way a command of one FILE is given its blob (:func:`blob_for`)."""
    command.add_argument("--header", type=blob_file, default=None, metavar="BLOB", help=BLOB_RULE)


def add_storage_options(command, applies_to: str = "every FILE, blob and output that is a URL") -> None:
    """``--storage-options JSON``: fsspec options for the FILEs, blobs and outputs that are URLs."""
    command.add_argument(
        "--storage-options", metavar="JSON", type=json_object, default=None,
        help=f"fsspec storage options for {applies_to}, never for a local path, as a JSON object, e.g. "
             "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}' (default: none; credentials and endpoints come "
             "from the environment)")


def json_object(text: str) -> dict:
    """An argparse type: a JSON object.

    >>> json_object('{"anon": true}')
    {'anon': True}
    >>> json_object("[1]")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a JSON object, got '[1]'
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def options_for(location, storage_options: dict | None) -> dict | None:
    """The storage options for ``location``: none for a local path, whose file system takes no such options.

    >>> options_for("a.rumi", {"anon": True}), options_for("s3://b/a.rumi", {"anon": True})
    (None, {'anon': True})
    """
    return None if is_local(location) else storage_options


def blob_for(path, header=None, storage_options: dict | None = None):
    """The blob a command reads ``path`` with: ``header`` (``--header``), else ``path.header`` when it exists,
    else ``None`` (rebuilt from the IFD). Looking costs a stat locally, one request remotely.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> blob_for(path), blob_for(path, "b.header")
    (None, 'b.header')
    >>> open(path + ".header", "wb").close()
    >>> blob_for(path) == path + ".header"
    True
    """
    if header is not None:
        return header
    beside = f"{os.fspath(path)}.header"
    if not is_url(beside):
        return beside if os.path.isfile(beside) else None
    from ..io.source import ByteSource

    try:
        ByteSource.of(beside, options_for(beside, storage_options)).size()
    except FileNotFoundError:
        return None
    return beside


def said_of(path, error: Exception) -> str:
    """``error`` as a command of several files says it: naming ``path`` once, where the message does not already.

    >>> said_of("cog.tif", ValueError("no EPSG code"))
    'cog.tif: no EPSG code'
    >>> said_of("a.rumi", OSError("frames.truncated: a.rumi is 9 bytes"))
    'frames.truncated: a.rumi is 9 bytes'
    """
    message = str(error)
    return message if os.fspath(path) in message else f"{os.fspath(path)}: {message}"


def read_by(files, header=None) -> list[str]:
    """What a run that reads ``files`` must not replace: each file, the blob beside it, and ``--header``'s blob.

    >>> read_by(["a.rumi"], "b.header")
    ['a.rumi', 'a.rumi.header', 'b.header']
    """
    inputs = [name for f in files for name in (os.fspath(f), f"{os.fspath(f)}.header")]
    return inputs + ([os.fspath(header)] if header else [])


def check_outputs(outputs, inputs, what: str = "an input", *, folders: bool = True) -> None:
    """Refuse, before any work, outputs that would replace an input or each other, or whose folder is missing.

    ``inputs`` are every file the run reads (a raster and the blob beside
    it); ``what`` says what they are, for the message.  ``folders=False``
    leaves the outputs' folders to the caller (one it makes itself).

    >>> check_outputs(["-", "a.rumi.json"], ["a.rumi"])
    >>> check_outputs(["a.rumi"], ["a.rumi"], "the raster")
    Traceback (most recent call last):
    ...
    xarray_rumi.cli.shared.Refused: the output is the input: writing a.rumi would replace a.rumi (the raster); ...
    """
    from ..writing.staging import refuse_overwriting

    outputs = [os.fspath(o) for o in outputs]
    try:
        refuse_overwriting(inputs, [o for o in outputs if o != STDOUT], what)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    for output in outputs if folders else ():
        check_folder(output)


def check_folder(output) -> None:
    """Raise :class:`CannotWrite` when a local output's folder is missing (or is not a folder): none is made.

    A mistyped folder would otherwise be created where it was not meant to
    be (at the file system's root, for one run); object stores have no folders.

    >>> check_folder("s3://bucket/no/such/prefix/item.json")
    >>> check_folder("/no/such/folder/item.json")
    Traceback (most recent call last):
    ...
    xarray_rumi.cli.shared.CannotWrite: cannot write /no/such/folder/item.json: the folder /no/such/folder does not ...
    """
    output = os.fspath(output)
    if output == STDOUT or not is_local(output):
        return
    folder = os.path.dirname(local_path(output).rstrip(os.sep)) or os.curdir
    if not os.path.exists(folder):
        raise CannotWrite(output, f"the folder {folder} does not exist (create it first)")
    if not os.path.isdir(folder):
        raise CannotWrite(output, f"{folder} is not a folder")


def write_output(target, data: bytes, storage_options=None) -> None:
    """Write ``data`` to standard output (``-``), or to a path or URL whole or not at all.

    A failure raises :class:`CannotWrite`; a reader of standard output that
    left raises ``BrokenPipeError``, which ``rumi`` ends quietly.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "blob.header")
    >>> write_output(path, b"blob")
    >>> open(path, "rb").read()
    b'blob'
    """
    target = os.fspath(target)
    if target == STDOUT:
        write_stdout(data)
        return
    from ..io.source import ByteSource
    from ..writing.staging import write_small

    try:
        write_small(ByteSource.of(target, storage_options), data)
    except OSError as exc:
        raise CannotWrite(target, exc) from exc


def write_stdout(data: bytes | str) -> None:
    """Write text or bytes to standard output; a failure is :class:`CannotWrite` (a reader that left stays a
    ``BrokenPipeError``)."""
    try:
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.flush()  # what was printed before comes first
            sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CannotWrite(STDOUT, exc) from exc


#: Packages whose errors are a storage client's (no credentials, no connection), not the package's.
STORAGE_CLIENTS = frozenset({"botocore", "aiobotocore", "s3fs", "aiohttp", "obstore", "google", "gcsfs", "adlfs",
                             "azure"})


def storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a storage client, to be said as ``cannot read`` like an ``OSError``.

    botocore's ``NoCredentialsError`` is neither an ``OSError`` nor a status
    the read engine classifies, and escaped as a traceback.

    >>> storage_error(type("NoCredentialsError", (Exception,), {"__module__": "botocore.exceptions"})())
    True
    >>> storage_error(ZeroDivisionError())
    False
    """
    return type(exc).__module__.split(".")[0] in STORAGE_CLIENTS


def install_hint(extra: str) -> str:
    """How to install an extra: from an index, or from a clone of the repository.

    >>> install_hint("geo")
    'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'
    """
    return f'pip install "xarray-rumi[{extra}]" (in a clone: pip install ".[{extra}]")'


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, as ``--help`` of GDAL's and Click's tools do.

    Help that already says its default (``default: ...``) is kept as it is;
    a flag's default is "off".

    >>> parser = argparse.ArgumentParser(prog="rumi x", formatter_class=HelpFormatter)
    >>> _ = parser.add_argument("--size", type=int, default=1024, help="longest side")
    >>> "longest side (default: 1024)" in parser.format_help()
    True
    """

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.nargs == 0 and isinstance(action.default, bool):  # a flag
            return f"{text} (default: {'on' if action.default else 'off'})"
        if action.default is None:
            return f"{text} (default: none)"
        return f"{text} (default: %(default)s)"


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: help formatted like ``rumi``'s, ending with the exit statuses."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EXIT_STATUS)
        super().__init__(*args, **kwargs)
