from __future__ import annotations

import os

import pytest

from spark_log.storage.checkpoint import (
    CheckpointFile,
    CorruptCheckpointError,
    OffsetCheckpointFile,
)
from spark_log.storage.filesystem import FileSystem


def test_offset_checkpoint_has_kafkas_format(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "recovery-point-offset-checkpoint"
    f = OffsetCheckpointFile(str(path))
    f.write({("orders", 1): 99, ("my-topic.v2", 0): 1234})
    assert path.read_text() == "0\n2\nmy-topic.v2 0 1234\norders 1 99\n"
    assert f.read() == {("orders", 1): 99, ("my-topic.v2", 0): 1234}


def test_missing_file_reads_empty(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert OffsetCheckpointFile(str(tmp_path / "none")).read() == {}


def test_write_is_atomic_via_fsynced_temp_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    events: list[str] = []

    class Recording(FileSystem):
        def fsync(self, fd: int) -> None:
            events.append("fsync")
            super().fsync(fd)

        def rename(self, src: str, dst: str) -> None:
            events.append(f"rename {os.path.basename(src)}")
            super().rename(src, dst)

        def fsync_dir(self, path: str) -> None:
            events.append("fsync_dir")
            super().fsync_dir(path)

    f = OffsetCheckpointFile(str(tmp_path / "cp"), Recording())
    f.write({("t", 0): 1})
    # fsync_dir fsyncs the directory through fsync, hence its trailing "fsync"
    assert events == ["fsync", "rename cp.tmp", "fsync_dir", "fsync"]
    assert not (tmp_path / "cp.tmp").exists()


@pytest.mark.parametrize("text,reason", [
    ("1\n0\n", "unrecognised version"),
    ("0\nx\n", "bad entry count"),
    ("0\n2\nt 0 1\n", "expected 2 entries but found 1"),
    ("0\n1\nt 0\n", "malformed line 3"),
    ("0\n1\nt zero 1\n", "malformed line 3"),
    ("0\n", "missing version or count"),
])
def test_corrupt_files_raise_naming_the_problem(tmp_path, text: str, reason: str  # type: ignore
                                                ) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=reason):
        OffsetCheckpointFile(str(path)).read()


def test_generic_lines_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = CheckpointFile(str(tmp_path / "leader-epoch-checkpoint"))
    f.write_lines(["0 0", "3 120"])
    assert f.read_lines(lambda p: (int(p[0]), int(p[1])), 2) == [(0, 0), (3, 120)]
