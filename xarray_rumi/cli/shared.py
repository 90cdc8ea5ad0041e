"""What every ``rumi`` command shares: help, exit statuses, and the rules for outputs, blobs and storage options."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from ..io.urls import is_local, is_url, local_path

#: Said at the end of every ``--help``.
EXIT_STATUS = ("exit status: 0 done (or the file is valid); 1 invalid, corrupt, unreadable or refused input; "
               "2 usage error or a missing optional dependency; 141 standard output closed early (| head), "
               "as for GNU tools")

#: 128 + SIGPIPE, as a shell reports for a GNU tool whose reader left: neither "done" (0) nor "invalid" (1).
READER_GONE = 141
STDOUT = "-"
OUTPUT_RULES = "'-' is standard output; missing folders are not created"
BLOB_RULE = "header blob file, path or URL (default: FILE.header when it exists, else rebuilt from the IFD)"

#: Packages whose errors are a storage client's (no credentials, no connection), not the package's.
STORAGE_CLIENTS = frozenset({"botocore", "aiobotocore", "s3fs", "aiohttp", "obstore", "google", "gcsfs", "adlfs",
                             "azure"})


class Refused(Exception):
    """An input or output the command refuses: said in one line, exit status 1."""


class CannotWrite(Exception):
    """An output that could not be written: said as ``cannot write TARGET: why``, exit status 1."""

    def __init__(self, target, cause):
        self.target, self.cause = os.fspath(target), cause
        where = "standard output" if self.target == STDOUT else self.target
        super().__init__(f"cannot write {where}: {cause}")


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def blob_file(text: str) -> str:
    """An argparse type for ``--header``: a path or URL, never empty (it would name the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must name a header blob file (a path or URL), got {text!r}")
    return text


def json_object(text: str) -> dict:
    """An argparse type: a JSON object."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {text!r}")
    return value


def add_reader(commands, name: str, run, **parser_options):
    """The parser of command ``name``, reading one rumi FILE with ``--header`` and ``--storage-options``."""
    command = commands.add_parser(name, **parser_options)
    command.add_argument("file", help="rumi file (path or URL)")
    command.add_argument("--header", type=blob_file, default=None, metavar="BLOB", help=BLOB_RULE)
    add_storage_options(command)
    command.set_defaults(run=run)
    return command


def add_storage_options(command, applies_to: str = "every FILE, blob and output that is a URL") -> None:
    command.add_argument(
        "--storage-options", metavar="JSON", type=json_object, default=None,
        help=f"fsspec storage options for {applies_to}, never for a local path, as a JSON object, e.g. "
             "'{\"endpoint_url\": \"http://127.0.0.1:9000\"}' (default: none; credentials and endpoints come "
             "from the environment)")


def options_for(location, storage_options: dict | None) -> dict | None:
    """The storage options for ``location``: none for a local path."""
    return None if is_local(location) else storage_options


def blob_for(path, header=None, storage_options: dict | None = None):
    """The blob ``path`` is read with: ``header``, else ``path.header`` when it exists, else ``None`` (the IFD's)."""
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
    """``error``'s message naming ``path`` once: prefixed with it unless it names it already."""
    message = str(error)
    return message if os.fspath(path) in message else f"{os.fspath(path)}: {message}"


def storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a storage client (botocore's ``NoCredentialsError`` is no ``OSError``)."""
    return type(exc).__module__.split(".")[0] in STORAGE_CLIENTS


def cannot_read(path, exc: Exception) -> str:
    """How a failure to read ``path`` is said: a storage client's error names its type, an ``OSError`` needs not."""
    return f"cannot read {path}: {exc if isinstance(exc, OSError) else f'{type(exc).__name__}: {exc}'}"


def read_or_report(command: str, path, read):
    """``read()``, or ``None`` once its refusal of ``path`` (or a storage failure) is said as ``rumi COMMAND: ...``."""
    from ..errors import RumiFormatError

    try:
        return read()
    except RumiFormatError as exc:
        said = said_of(path, exc)
    except Exception as exc:
        if not (isinstance(exc, OSError) or storage_error(exc)):
            raise
        said = cannot_read(path, exc)
    print(f"rumi {command}: {said}", file=sys.stderr)
    return None


def read_by(files, header=None) -> list[str]:
    """What a run that reads ``files`` must not replace: each file, the blob beside it, and ``--header``'s blob."""
    inputs = [name for f in files for name in (os.fspath(f), f"{os.fspath(f)}.header")]
    return inputs + ([os.fspath(header)] if header else [])


def check_outputs(outputs, inputs, what: str = "an input", *, folders: bool = True) -> None:
    """Before any work: :class:`Refused` for outputs that would replace an input (``what``) or each other, and
    :class:`CannotWrite` for a missing folder (unless ``folders=False``)."""
    from ..writing.staging import refuse_overwriting

    outputs = [os.fspath(o) for o in outputs]
    try:
        refuse_overwriting(inputs, [o for o in outputs if o != STDOUT], what)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    for output in outputs if folders else ():
        check_folder(output)


def check_folder(output) -> None:
    """:class:`CannotWrite` when a local output's folder is missing: a mistyped folder is named, not made."""
    output = os.fspath(output)
    if output == STDOUT or not is_local(output):
        return
    folder = os.path.dirname(local_path(output).rstrip(os.sep)) or os.curdir
    if not os.path.exists(folder):
        raise CannotWrite(output, f"the folder {folder} does not exist (create it first)")
    if not os.path.isdir(folder):
        raise CannotWrite(output, f"{folder} is not a folder")


def make_folder(folder: str, storage_options: dict | None = None) -> None:
    """Make the output folder ``folder`` when missing, but never a folder above it (:class:`CannotWrite` names it)."""
    if not is_local(folder):
        import fsspec

        fs, root = fsspec.core.url_to_fs(folder, **(storage_options or {}))
        fs.makedirs(root, exist_ok=True)
        return
    check_folder(folder.rstrip(os.sep))
    try:
        os.makedirs(local_path(folder), exist_ok=True)
    except OSError as exc:
        raise CannotWrite(folder, exc) from exc


def write_output(target, data: bytes, storage_options=None) -> None:
    """Write ``data`` to standard output (``-``), or to a path or URL whole or not at all; else :class:`CannotWrite`."""
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
    """Write text or bytes to standard output, flushed: :class:`CannotWrite` if it cannot (``> /dev/full``), never
    taken for a failure to read the input; the BrokenPipeError of a reader that left (``| head``) goes on."""
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


def say(line: str) -> None:
    """Print ``line`` on standard output, as :func:`write_stdout` writes."""
    write_stdout(f"{line}\n")


def stac_bytes(items, output: str, collection: bool = False) -> bytes:
    """``items`` as stac-geoparquet for a ``.parquet`` ``output``, else as one Item's JSON or an ItemCollection's."""
    if not output.endswith(".parquet"):
        documents = [item.to_dict(include_self_link=False) for item in items]
        collected = collection or len(documents) > 1
        document = {"type": "FeatureCollection", "features": documents} if collected else documents[0]
        return (json.dumps(document, indent=2) + "\n").encode()
    from ..stac.geoparquet import write_stac_geoparquet

    with tempfile.TemporaryDirectory(prefix="rumi-stac-") as folder:  # pyarrow writes to a path, not to bytes
        built = os.path.join(folder, "items.parquet")
        try:
            write_stac_geoparquet(items, built)
            with open(built, "rb") as f:
                return f.read()
        except OSError as exc:
            raise CannotWrite(output, exc) from exc


def install_hint(extra: str) -> str:
    """How to install an extra: from an index, or from a clone of the repository.

    >>> install_hint("geo")
    'pip install "xarray-rumi[geo]" (in a clone: pip install ".[geo]")'
    """
    return f'pip install "xarray-rumi[{extra}]" (in a clone: pip install ".[{extra}]")'


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it says it already; a flag's is "off" or "on".

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
        return f"{text} (default: {'none' if action.default is None else '%(default)s'})"


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: help formatted like ``rumi``'s, ending with the exit statuses."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EXIT_STATUS)
        super().__init__(*args, **kwargs)
