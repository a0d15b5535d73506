"""``robot-grpo convert-logs PATH...``: turn old ``.tlog`` tick logs into MCAP tick logs, once.

Each old log (a ``*.tlog`` file with its segments ``*.tlog.1``, ..., or every such log in a folder) becomes
``<stem>.mcap`` beside it, holding every record the old reader could read; what it skipped (damage, a torn tail)
is named on the output line and in the new file's ``converted_from`` metadata. The old files are left as they are
(delete them once the new ones serve). An existing ``.mcap`` is never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launch.schema import LaunchError
from launch.tlog_legacy import LEGACY_SUFFIX, read_legacy_log


@dataclass(frozen=True)
class Conversion:
    """One old log converted: where from, where to, how many ticks, what the old reader skipped."""

    source: Path
    target: Path
    ticks: int
    corrupt_records: int
    torn_tails: int

    def line(self) -> str:
        skipped = ""
        if self.corrupt_records or self.torn_tails:
            skipped = f" (skipped {self.corrupt_records} damaged record(s), {self.torn_tails} torn tail(s))"
        return f"{self.source} -> {self.target}: {self.ticks} ticks{skipped}"


def old_logs(path: Path) -> list[Path]:
    """The first segments of the old logs at ``path`` (a ``.tlog`` file, or a folder of them)."""
    if path.is_dir():
        found = sorted(p for p in path.glob(f"*{LEGACY_SUFFIX}") if p.is_file())
        if not found:
            raise LaunchError(f"{path}: no old tick logs (*{LEGACY_SUFFIX}) to convert")
        return found
    if path.suffix != LEGACY_SUFFIX:
        raise LaunchError(f"{path}: not an old tick log; convert-logs takes *{LEGACY_SUFFIX} files or their folder")
    if not path.is_file():
        raise FileNotFoundError(f"old tick log {path} does not exist")
    return [path]


def convert_log(source: Path) -> Conversion:
    """Write the MCAP tick log of the old log ``source`` (first segment) beside it as ``<stem>.mcap``."""
    from deploy.runtime.ticklog import TICKLOG_SUFFIX, TickLogWriter

    target = source.with_suffix(TICKLOG_SUFFIX)
    if target.exists():
        raise LaunchError(f"{target} exists; move it away to convert {source} again")
    try:
        scan = read_legacy_log(source)
    except ValueError as err:
        raise LaunchError(str(err)) from None
    origin = {
        "files": ", ".join(f.name for f in scan.files),
        "ticks": str(len(scan.records)),
        "corrupt_records": str(scan.corrupt_records),
        "torn_tails": str(scan.torn_tails),
    }
    with TickLogWriter(target, fsync_interval_s=None, metadata={"converted_from": origin}) as writer:
        for record in scan.records:
            writer.append(record)
    return Conversion(source, target, len(scan.records), scan.corrupt_records, scan.torn_tails)


def main(paths: list[str]) -> int:
    """Convert every old log at ``paths``; prints one line per log."""
    sources = [log for p in paths for log in old_logs(Path(p))]
    for source in sources:
        print(convert_log(source).line())
    print(f"converted {len(sources)} log(s); the old *{LEGACY_SUFFIX} files are unchanged (delete them when done)")
    return 0
