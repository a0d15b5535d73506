"""Files that ship with robot-grpo, found relative to the installed packages, never the current folder.

The project ships inputs its jobs default to: robot spec files (``calibration/sim_fetch.yaml``), launch files
(``launch/*.yaml``) and the default policy package with its checkpoint (``models/``). They sit beside the Python
packages, in the checkout or in ``site-packages`` after a plain (wheel) install, so this module finds them from its
own location, and every command works from any folder.

A path a user gives keeps meaning what a shell means by it: relative to the current folder. To name a shipped file
from a launch file, ``--set`` or ``--config``, write ``shipped:<path inside the project>``, e.g.
``shipped:calibration/sim_fetch.yaml``; :func:`resolve_path` turns it into the file's absolute path on this machine.
The shipped launch files use that form for every default they name.

stdlib only: the runtime, the calibration probe, the launch files' schema and cluster workers all use it.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

#: The prefix that names a file shipped with robot-grpo in a launch value (``shipped:models/default``).
SHIPPED_PREFIX = "shipped:"
#: The folder holding ``deploy/``, ``calibration/``, ``launch/`` and ``models/``: the checkout, or site-packages.
INSTALL_ROOT = Path(__file__).resolve().parent.parent


class ShippedFileError(ValueError):
    """A ``shipped:`` name that does not name a file of this installation."""


def shipped_path(relative: str) -> Path:
    """The absolute path of ``relative`` (e.g. ``"calibration/sim_fetch.yaml"``) inside the installed project.

    :raises ShippedFileError: ``relative`` is absolute or climbs out of the project (``..``), or names nothing
        this installation holds (the message says where it looked).
    """
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
        raise ShippedFileError(
            f"{SHIPPED_PREFIX}{relative} must name a path inside the project, like "
            f"{SHIPPED_PREFIX}calibration/sim_fetch.yaml (no leading '/', no '..')"
        )
    path = INSTALL_ROOT.joinpath(*parts)
    if not path.exists():
        raise ShippedFileError(
            f"{SHIPPED_PREFIX}{relative}: this installation of robot-grpo has no {relative} (looked in "
            f"{INSTALL_ROOT}); reinstall robot-grpo, or give the file's own path"
        )
    return path


def resolve_path(value: str | Path) -> Path:
    """A path from a launch file, ``--set`` or ``--config``: ``shipped:<path>`` -> :func:`shipped_path`; any other
    value unchanged (a relative path stays relative to the current folder)."""
    text = str(value)
    if text.startswith(SHIPPED_PREFIX):
        return shipped_path(text[len(SHIPPED_PREFIX) :])
    return Path(value)
