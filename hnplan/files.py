"""Files hnplan writes for the user (calibrated catalog entries, rendered reports): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: a temporary file in the same folder, then a rename
    (``os.replace``, atomic on POSIX within one file system), readable by all (mode 0644: the files are for
    sharing). Text is written as UTF-8, bytes as they are. Missing folders are made.

    Raises
    ------
    OSError
        When the folder cannot be made or written, or ``path`` is a folder; the error names ``path``, the file
        asked for, not the temporary file beside it, which is removed.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out" / "a.yaml"
    >>> atomic_write(p, "x: 1\\n"); p.read_text(), oct(p.stat().st_mode & 0o777)
    ('x: 1\\n', '0o644')
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _name_target(exc, path) from None
    try:
        with os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": "utf-8"})) as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _name_target(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _name_target(exc: OSError, path: Path) -> OSError:
    """``exc`` naming the file the user asked for, not the temporary file beside it (a folder given as
    the output file, a read-only folder)."""
    if exc.filename is not None and Path(exc.filename).name.startswith(f".{path.name}."):
        exc.filename, exc.filename2 = str(path), None
    return exc
