"""`spark-log dump-log --files ...`: what is inside segment files, like kafka-dump-log.sh; and
`dump-log --verify [--data-dir DIR]`: a read-only check of a whole data directory.

It reads files directly (no broker) and hands each to its dumper by suffix: `.log` segments to
`dump_segment`; `.index`, `.timeindex`, `.snapshot` and `.txnindex` to `dump_index`.
`--offsets-decoder` and `--transaction-log-decoder` decode the records of the internal topics
(`dump_decoders`). `--verify` goes to `verify_data_dir`. `--json` prints JSON objects instead
of Kafka's text lines. Exit code 1 if any file was damaged, failed a check or is of an unknown
kind.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .errors import CliError, UsageError
from .output import notice


def add_dump_log_parser(commands: Any) -> None:
    p = commands.add_parser("dump-log", help="print the contents of log segment files",
                            description="Print segment, index, time index, producer snapshot "
                                        "and transaction index files, like kafka-dump-log.")
    p.add_argument("--files", action="append", metavar="FILE[,FILE]",
                   help="files to dump (comma-separated and/or repeated)")
    p.add_argument("--verify", action="store_true",
                   help="check every file of a broker data directory, read-only, and list "
                        "every problem (exit code 1 if any)")
    p.add_argument("--data-dir", type=Path, metavar="DIR",
                   help="the data directory --verify checks (default: $SPARK_LOG_DATA_DIR, "
                        "else ~/.spark_log/data)")
    p.add_argument("--print-data-log", action="store_true",
                   help="print each record of a .log file, not only its batches")
    p.add_argument("--deep-iteration", action="store_true",
                   help="decode every record (implied by --print-data-log)")
    p.add_argument("--verify-index-only", action="store_true",
                   help="check index entries against the .log, print only mismatches")
    p.add_argument("--index-sanity-check", action="store_true",
                   help="only check that index files are well formed")
    decoders = p.add_mutually_exclusive_group()
    decoders.add_argument("--offsets-decoder", action="store_true",
                          help="decode __consumer_offsets records (implies --print-data-log)")
    decoders.add_argument("--transaction-log-decoder", action="store_true",
                          help="decode __transaction_state records (implies --print-data-log)")
    p.add_argument("--json", action="store_true", help="JSON objects instead of text lines")
    p.set_defaults(run=_dump)


_DUMP_ONLY = ("files", "print_data_log", "deep_iteration", "verify_index_only",
              "index_sanity_check", "offsets_decoder", "transaction_log_decoder")


def _dump(args: argparse.Namespace) -> int:
    if args.verify:
        return _verify(args)
    if args.data_dir is not None:
        raise UsageError("--data-dir goes with --verify (to dump files, name them with --files)")
    if not args.files:
        raise UsageError("give the files to dump (--files FILE[,FILE]), or --verify a data "
                         "directory")
    from .dump_decoders import decode_offsets_record, decode_transaction_record
    from .dump_index import DUMPERS  # the record codecs load only when needed
    from .dump_segment import dump_segment

    args.decoder = decode_offsets_record if args.offsets_decoder else \
        decode_transaction_record if args.transaction_log_decoder else None
    args.print_data_log |= args.decoder is not None

    files = [Path(f) for spec in args.files for f in spec.split(",") if f.strip()]
    if not files:
        raise UsageError("--files names no file")
    ok = True
    for path in files:
        if not path.is_file():
            raise CliError(f"{path}: " + ("a directory; name its segment files (*.log, *.index "
                                          "...)" if path.is_dir() else "no such file"))
        if path.suffix == ".log":
            ok = dump_segment(path, args) and ok
        elif path.suffix in DUMPERS:
            ok = DUMPERS[path.suffix](path, args) and ok
        else:
            notice(f"Ignoring unknown file {path}")
            ok = False
    return 0 if ok else 1


def _verify(args: argparse.Namespace) -> int:
    from spark_log import sidecar

    from .verify_data_dir import run_verify

    given = [name for name in _DUMP_ONLY if getattr(args, name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(f"{flags} cannot go with --verify, which checks a whole data "
                         "directory (--data-dir)")
    return run_verify(sidecar.resolve_data_dir(args.data_dir), args.json)
