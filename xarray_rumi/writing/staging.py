"""Files, and directories of files, that appear whole or not at all."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import uuid

from ..io.source import ByteSource
from ..io.urls import absolute, is_local, local_path
from ..runtime.threads import cancel_or_wait, in_background

WRITEBACK_BYTES = 4 * 2**20


@contextlib.contextmanager
def staged(target: ByteSource):
    """A file that appears at ``target`` whole when the block ends, or not at all.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> with staged(ByteSource.of(path)) as f:
    ...     _ = f.write(b"all or nothing")
    ...     os.path.exists(path)
    False
    >>> open(path, "rb").read()
    b'all or nothing'
    """
    directory = os.path.dirname(os.path.abspath(target.local_path)) if target.is_local else None
    f, name = _anonymous_file(directory)
    try:
        yield f
        f.flush()
        if target.is_local:
            os.fsync(f.fileno())
            if name is None:
                name = _link_anonymous(f, directory)
            replaced = _hold(target.local_path)
            try:
                os.replace(name, target.local_path)
                name = None
            finally:
                if replaced is not None:
                    try:
                        in_background(os.close, replaced)
                    except RuntimeError:  # the interpreter is shutting down: no new threads
                        os.close(replaced)
        else:
            fs, path = target._fs_path
            f.seek(0)
            with fs.open(path, "wb") as out:  # object stores make an upload visible whole or not at all
                shutil.copyfileobj(f, out, 8 * 1024 * 1024)
    finally:
        f.close()
        if name is not None and os.path.exists(name):
            os.unlink(name)


def same_place(first, second) -> bool:
    """Whether two paths or URLs name one file: local ones as files (links, relative paths), URLs as written.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.rumi")
    >>> same_place(path, "file://" + path), same_place(path, path + ".header")
    (True, False)
    """
    first, second = os.fspath(first), os.fspath(second)
    if not (is_local(first) and is_local(second)):
        return absolute(first) == absolute(second)
    first, second = local_path(first), local_path(second)
    if os.path.exists(first) and os.path.exists(second):
        return os.path.samefile(first, second)
    return os.path.realpath(first) == os.path.realpath(second)


def refuse_overwriting(inputs, outputs, what: str = "an input") -> None:
    """Raise ``ValueError`` when writing one of ``outputs`` would replace one of ``inputs``, or another output.

    >>> refuse_overwriting(["a.rumi"], ["./a.rumi"])
    Traceback (most recent call last):
    ...
    ValueError: the output is the input: writing ./a.rumi would replace a.rumi (an input); choose another output
    """
    outputs = [os.fspath(o) for o in outputs]
    for number, written in enumerate(outputs):
        for source in inputs:
            if same_place(source, written):
                raise ValueError(f"the output is the input: writing {written} would replace {os.fspath(source)} "
                                 f"({what}); choose another output")
        for other in outputs[:number]:
            if same_place(other, written):
                raise ValueError(f"two outputs of one run are the same file: {other} and {written}; "
                                 f"the second would replace the first")


def write_small(target: ByteSource, data: bytes) -> None:
    """Write ``data`` at ``target`` whole or not at all."""
    with staged(target) as f:
        f.write(data)


@contextlib.contextmanager
def staged_directory(target: ByteSource, *, last=()):
    """A local directory to fill that appears at ``target`` when the block ends, or not at all.

    Remotely the names in ``last`` (what a reader opens first) are uploaded after all the others.
    """
    parent = os.path.dirname(os.path.abspath(target.local_path)) if target.is_local else None
    with tempfile.TemporaryDirectory(dir=parent, prefix=".rumi-") as staging:
        built = os.path.join(staging, "built")
        os.mkdir(built)
        yield built
        if target.is_local:
            _replace_directory(built, target.local_path, os.path.join(staging, "previous"))
        else:
            fs, path = target._fs_path
            _upload_directory(fs, built, path.rstrip("/"), last)


def _replace_directory(built: str, path: str, previous: str) -> None:
    """Rename ``built`` to ``path``, an older ``path`` moved aside to ``previous`` and back on failure."""
    if os.path.lexists(path):
        os.replace(path, previous)
    try:
        os.replace(built, path)
    except BaseException:
        if os.path.lexists(previous):
            os.replace(previous, path)
        raise


def _upload_directory(fs, built: str, path: str, last) -> None:
    files = sorted(
        (os.path.relpath(os.path.join(root, name), built) for root, _, names in os.walk(built) for name in names),
        key=lambda name: (name in last, name),
    )
    if fs.exists(path):
        fs.rm(path, recursive=True)
    try:
        for name in files:
            fs.put_file(os.path.join(built, name), f"{path}/{name.replace(os.sep, '/')}")
    except BaseException:
        try:
            fs.rm(path, recursive=True)
        except Exception:  # noqa: BLE001 - the upload's error is the one to report
            pass
        raise


class Writeback:
    """Hands a staged local file to the disk every ``WRITEBACK_BYTES`` while later frames are encoded."""

    def __init__(self, f):
        self._f, self._unflushed, self._flushing = f, 0, None

    def wrote(self, count: int) -> int:
        self._unflushed += count
        if self._f is not None and self._unflushed >= WRITEBACK_BYTES and (
                self._flushing is None or self._flushing.done()):
            if self._flushing is not None:  # its failure is raised here: the kernel tells one fsync only
                self._flushing.result()
            self._f.flush()
            self._flushing = in_background(getattr(os, "fdatasync", os.fsync), self._f.fileno())
            self._unflushed = 0
        return count

    def __enter__(self):
        return self

    def __exit__(self, kind, *_):
        if self._flushing is not None:
            # the file stays open until the flush is done; one that has not started is not needed any more
            flushing, self._flushing = self._flushing, None
            try:
                cancel_or_wait(flushing)
            except Exception:
                if kind is None:
                    raise


def _hold(path: str) -> int | None:
    # a descriptor that keeps a replaced file alive: freeing its blocks (slow with ``discard``) waits for its close,
    # on the background thread, not for the rename
    if os.name != "posix":
        return None
    try:
        # O_PATH (Linux) needs no read permission; O_NONBLOCK: a FIFO there must not block the writer
        return os.open(path, getattr(os, "O_PATH", os.O_RDONLY | os.O_NONBLOCK) | os.O_CLOEXEC)
    except OSError:  # nothing there yet, or nothing we may open: replace it as it is
        return None


def _anonymous_file(directory: str | None):
    """``(file, name)``, ``name`` ``None`` for an unnamed ``O_TMPFILE`` file."""
    flags = getattr(os, "O_TMPFILE", 0)
    if flags:
        try:
            fd = os.open(directory or tempfile.gettempdir(), flags | os.O_RDWR, 0o666)
            return os.fdopen(fd, "w+b"), None
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, name = tempfile.mkstemp(prefix=".rumi-", suffix=".tmp", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
    return os.fdopen(fd, "w+b"), name


def _link_anonymous(f, directory: str) -> str:
    name = os.path.join(directory, f".rumi-{os.getpid()}-{uuid.uuid4().hex}.tmp")
    # CPython passes AT_SYMLINK_FOLLOW, which an O_TMPFILE link needs, only with a dir_fd (irrelevant here)
    root = os.open("/", os.O_RDONLY)
    try:
        os.link(f"/proc/self/fd/{f.fileno()}", name, src_dir_fd=root, follow_symlinks=True)
    finally:
        os.close(root)
    return name
