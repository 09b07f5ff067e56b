"""`spark-log dump-log --verify [--data-dir DIR]`: check a whole broker data directory without
changing anything, and list every problem found.

It owns the directory level: the partition directories' names, meta.properties, topics.json
and its partition counts against the directories, the offset checkpoints against each log's
end, the producer-id-block against the producer ids in use, and the report. Each partition is
checked by `verify_partition`.

A *problem* is a file whose content is damaged or disagrees with the rest of the directory,
even where a broker start would repair it (indexes, snapshots and checkpoints are rebuilt,
torn tails cut): exit code 1. A *note* is what a broker leaves by design and its next start
finishes or removes (`*.deleted`, `*.tmp`, `*.cleaned`, `*.swap`, `*-delete` directories, a
missing clean-shutdown marker, a missing index), or a file the broker ignores: exit code 0.
Files are only opened for reading (never created, written, resized, renamed or locked), so a
running broker is safe; a note then says that the active segment being written may show a torn
tail.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spark_log import sidecar
from spark_log.properties import ConfigError
from spark_log.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    TopicPartition,
)
from spark_log.storage.cleaner.cleaner_manager import CLEANER_OFFSET_CHECKPOINT
from spark_log.storage.data_dir import lock_file, meta_properties, producer_id_block, topics_file
from spark_log.storage.log.log_manager import CLEAN_SHUTDOWN_FILE
from spark_log.storage.log.partition_dir import (
    DELETE_DIR_SUFFIX,
    parse_partition_dir,
    partition_dir_name,
)

from .errors import CliError
from .output import print_json, progress
from .verify_partition import (
    METADATA_LOG_DIR,
    PartitionFacts,
    list_files,
    verify_partition,
)
from .verify_report import Report, without_path

OFFSET_CHECKPOINTS = {RECOVERY_POINT_CHECKPOINT: "recovery point",
                      LOG_START_OFFSET_CHECKPOINT: "log start offset",
                      REPLICATION_OFFSET_CHECKPOINT: "high watermark",
                      CLEANER_OFFSET_CHECKPOINT: "cleaner offset"}
BROKER_FILES = frozenset({
    meta_properties.FILE_NAME, topics_file.FILE_NAME, producer_id_block.FILE_NAME,
    lock_file.FILE_NAME, CLEAN_SHUTDOWN_FILE, sidecar.INFO_FILE, sidecar.LOCK_FILE,
    sidecar.LOG_FILE, sidecar.PORT_FILE, *OFFSET_CHECKPOINTS})
_NOT_OURS = ("-future", "-stray")  # Kafka's replica-movement directories; the broker skips them


def run_verify(data_dir: Path, as_json: bool) -> int:
    """Verify `data_dir`, print the report; the exit code (1 if any problem was found)."""
    report = verify_data_dir(data_dir)
    if as_json:
        print_json(_json_report(report))
    else:
        for finding in report.listed():
            print(f"{finding.path}: {'' if finding.problem else 'note: '}{finding.text}")
        print(_summary(report))
    return 1 if report.problems else 0


def _summary(report: Report) -> str:
    problems = f"{report.problems} problem(s)" if report.problems else "no problems"
    return (f"Verified {report.data_dir}: {report.partitions} partition(s), {report.segments} "
            f"segment(s), {report.batches} batch(es); {problems}, {report.notes} note(s).")


def _json_report(report: Report) -> dict[str, Any]:
    listed = report.listed()
    return {"data_dir": str(report.data_dir), "broker_running": report.broker_running,
            "partitions": report.partitions, "segments": report.segments,
            "batches": report.batches, "problem_count": report.problems,
            "note_count": report.notes,
            "problems": [{"path": f.path, "problem": f.text} for f in listed if f.problem],
            "notes": [{"path": f.path, "note": f.text} for f in listed if not f.problem]}


def verify_data_dir(data_dir: Path) -> Report:
    """Check everything in `data_dir` (CliError if it is not a readable directory)."""
    report = Report(data_dir)
    entries = _list(data_dir)
    names = [name for name, _ in entries]
    special = {name for name, regular in entries if not regular}  # never opened
    running = None if sidecar.INFO_FILE in special else _running_broker(data_dir)
    if running is not None:
        report.broker_running = True
        report.note(data_dir, f"a broker (pid {running}) is running on this directory: "
                              "files may change while they are read, and the active segment "
                              "being written may show a torn tail")
    # Checkpoints first: a log only grows while it is read after them.
    checkpoints = {name: {} if name in special else _read_offsets(data_dir / name, report)
                   for name in OFFSET_CHECKPOINTS}
    partitions = _partition_dirs(data_dir, names, report)
    _other_files(data_dir, entries, report)
    starts = checkpoints[LOG_START_OFFSET_CHECKPOINT]
    # Unless the broker stopped cleanly, its next start recovers each log from its recovery
    # point, and leader epochs first seen after it need not be in the checkpoint yet.
    stopped_cleanly = running is None and CLEAN_SHUTDOWN_FILE in names
    recovery_points = checkpoints[RECOVERY_POINT_CHECKPOINT]
    facts: dict[TopicPartition, PartitionFacts] = {}
    with progress(f"verifying {data_dir}", len(partitions)) as bar:
        for tp, path in sorted(partitions.items()):
            report.partitions += 1
            found = verify_partition(path, starts.get(tp, 0), report,
                                     None if stopped_cleanly else recovery_points.get(tp, 0))
            if found is not None:
                facts[tp] = found
            bar.advance()
    for name, offsets in checkpoints.items():
        _check_offsets(data_dir / name, OFFSET_CHECKPOINTS[name], offsets, facts, report)
    in_use = bool(partitions) or topics_file.FILE_NAME in names
    if meta_properties.FILE_NAME not in special:
        _verify_meta_properties(data_dir / meta_properties.FILE_NAME, in_use, report)
    if METADATA_LOG_DIR in names:
        _legacy_files(data_dir, names, report)
    else:  # from before the metadata log: what its first start will import
        if topics_file.FILE_NAME not in special:
            _verify_topics(data_dir / topics_file.FILE_NAME, partitions, report)
        if producer_id_block.FILE_NAME not in special:
            _verify_producer_id_block(data_dir / producer_id_block.FILE_NAME, facts, report)
    if partitions and running is None and not stopped_cleanly:
        report.note(data_dir, f"no clean-shutdown marker ({CLEAN_SHUTDOWN_FILE}): the broker "
                              "did not stop cleanly; its next start recovers the logs from "
                              "their recovery points")
    return report


def _list(data_dir: Path) -> list[tuple[str, bool]]:
    """The directory's entries (name, whether a regular file); CliError if it cannot be
    listed."""
    try:
        return list_files(data_dir)
    except FileNotFoundError:
        raise CliError(f"{data_dir}: no such directory") from None
    except NotADirectoryError:
        raise CliError(f"{data_dir}: not a directory") from None
    except OSError as exc:
        raise CliError(f"{data_dir}: cannot be read: {exc.strerror or exc}") from None


def _running_broker(data_dir: Path) -> int | None:
    """The pid of the broker running on `data_dir` (its broker.json names a live broker)."""
    try:
        status = sidecar.status(data_dir)
    except (OSError, ValueError, TypeError, KeyError):  # a broker.json that is not one
        return None
    return status.pid if status.running else None


def _partition_dirs(data_dir: Path, names: list[str], report: Report
                    ) -> dict[TopicPartition, Path]:
    """The partition directories by (topic, partition); other directories reported."""
    found = {}
    for name in names:
        path = data_dir / name
        if not path.is_dir():
            continue
        tp = parse_partition_dir(name)
        if name.endswith(DELETE_DIR_SUFFIX):
            report.note(path, "a deleted partition's directory: a broker start removes it")
        elif name == "lost+found":
            report.note(path, "the file system's, not the broker's (it ignores it)")
        elif tp is None or name.endswith(_NOT_OURS):
            report.problem(path, "not a partition directory (<topic>-<partition>): the broker "
                                 "skips it")
        elif partition_dir_name(*tp) != name:
            report.problem(path, f"not the name of partition {tp[1]} of topic {tp[0]} "
                                 f"({partition_dir_name(*tp)}): the broker skips its data")
        else:
            found[tp] = path
    return found


def _other_files(data_dir: Path, entries: list[tuple[str, bool]], report: Report) -> None:
    for name, regular in entries:
        path = data_dir / name
        if name in BROKER_FILES:
            if not regular:
                report.problem(path, "not a regular file: the broker cannot use it")
        elif path.is_dir():
            continue
        elif name.endswith(".tmp"):
            report.note(path, "a write in progress, or left by an interrupted one: the next "
                              "write replaces it")
        else:
            report.note(path, "not a file the broker uses (it ignores it)")


# ---- checkpoints --------------------------------------------------------------------------

def _read_offsets(path: Path, report: Report) -> dict[TopicPartition, int]:
    """An offset checkpoint as storage reads it ({} if absent or damaged, as the broker
    takes it)."""
    try:
        return OffsetCheckpointFile(str(path)).read()
    except (CorruptCheckpointError, UnicodeDecodeError) as exc:
        report.problem(path, without_path(str(exc), path))
    except OSError as exc:
        report.problem(path, f"cannot be read: {exc.strerror or exc}")
    return {}


def _check_offsets(path: Path, what: str, offsets: Mapping[TopicPartition, int],
                   facts: Mapping[TopicPartition, PartitionFacts], report: Report) -> None:
    """Each entry names a partition directory and an offset inside its log."""
    for (topic, partition), offset in sorted(offsets.items()):
        name = partition_dir_name(topic, partition)
        found = facts.get((topic, partition))
        if found is None:
            if not (path.parent / name).is_dir():
                report.note(path, f"{name}: no such partition directory (the broker ignores "
                                  "the entry)")
        elif offset > found.log_end_offset:
            report.problem(path, f"{name}: {what} {offset} is past the log end offset "
                                 f"{found.log_end_offset}")


# ---- meta.properties, topics.json, producer-id-block --------------------------------------

def _verify_meta_properties(path: Path, in_use: bool, report: Report) -> None:
    if not path.exists():
        if in_use:
            report.note(path, "missing: the next broker start writes one")
        return
    try:
        meta_properties.read(path)
    except ConfigError as exc:
        report.problem(path, without_path(str(exc), path))


def _legacy_files(data_dir: Path, names: list[str], report: Report) -> None:
    """With a metadata log, topics and producer ids live there: the files that held them
    before were read once, at the start that wrote the log, and are kept but not used."""
    for name in (topics_file.FILE_NAME, producer_id_block.FILE_NAME):
        if name in names:
            report.note(data_dir / name, "kept from before the cluster metadata log, which "
                                         "holds this now: the broker no longer reads it")


def _verify_topics(path: Path, partitions: Mapping[TopicPartition, Path], report: Report
                   ) -> None:
    """topics.json as the broker reads it, and its partition counts against the partition
    directories."""
    if not path.exists():
        if partitions:
            report.problem(path, "missing: the broker adopts the partition directories as "
                                 "topics with default configs (their configs are lost)")
        return
    try:
        counts = {t.name: t.partitions for t in topics_file.read_topics_file(path)}
    except ConfigError as exc:  # the broker refuses to start
        report.problem(path, without_path(str(exc), path))
        return
    for topic, count in counts.items():
        missing = [p for p in range(count) if (topic, p) not in partitions]
        if missing:
            report.problem(path, f"topic {topic}: no directory for partition(s) "
                                 f"{_ranges(missing)}: the broker starts them empty")
    extra: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        if partition >= counts.get(topic, 0):
            extra.setdefault(topic, []).append(partition)
    for topic, found in extra.items():
        known = f"has {counts[topic]} partition(s)" if topic in counts else "is not listed"
        report.problem(path, f"topic {topic} {known}, but directories of its partition(s) "
                             f"{_ranges(found)} exist: the broker adopts them")


def _verify_producer_id_block(path: Path, facts: Mapping[TopicPartition, PartitionFacts],
                              report: Report) -> None:
    """The block end as the broker reads it, above every producer id in use, or a restarted
    broker could hand one out again."""
    used = max((f.max_producer_id for f in facts.values()), default=-1)
    if not path.exists():
        if used >= 0:
            report.problem(path, f"missing, but the logs hold producer ids up to {used}: the "
                                 "broker would hand them out again")
        return
    try:
        end = producer_id_block.read_block_end(path)
    except ConfigError as exc:  # the broker refuses to start
        report.problem(path, without_path(str(exc), path))
        return
    if end <= used:
        report.problem(path, f"block end {end} is not above producer id {used} in the logs: "
                             "the broker would hand it out again")


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)

