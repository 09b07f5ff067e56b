"""Dumping a `.log` segment for `dump-log`: batch by batch (base and last offset, count,
position, create time, size, magic, compression, CRC and whether it checks, producer
id/epoch/sequence, transactional and control flags), and with `--print-data-log` each record
(key, value, headers; the marker of a control record), in kafka-dump-log's words or as JSON.
`--deep-iteration` prints each record's offset, timestamp, sizes, sequence and header keys;
`--print-data-log` adds its key and payload, which `--offsets-decoder` and
`--transaction-log-decoder` decode as the records of the internal topics (see
`dump_decoders`).
A batch whose CRC does not match prints `isvalid: false` (its records are not decoded); a batch
that does not parse ends the dump of its file with a message naming its position. Either makes
the file count as damaged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from spark_log.records import (
    BatchView,
    ControlRecordType,
    CorruptRecordError,
    Record,
    iter_batches,
    parse_control_record_type,
    parse_end_transaction_marker,
)
from spark_log.records.batch_header import compute_crc

from .dump_decoders import Decoder
from .errors import CliError
from .output import print_json, progress


def read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from None


def dump_segment(path: Path, args: argparse.Namespace) -> bool:
    deep = args.print_data_log or args.deep_iteration
    if not args.json:
        print(f"Dumping {path}")
        print(f"Log starting offset: {base_offset_of(path)}")
    data = read_file(path)
    all_valid = True
    with progress(f"reading {path.name}", len(data)) as bar:
        try:
            for batch in iter_batches(data):
                all_valid = _dump_batch(batch, deep, args) and all_valid
                bar.advance(batch.size)
        except CorruptRecordError as exc:
            _report_corrupt(path, exc, args.json)
            return False
    return all_valid


def base_offset_of(path: Path) -> int:
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else 0


def _dump_batch(batch: BatchView, deep: bool, args: argparse.Namespace) -> bool:
    """Print one batch (and its records); False if its CRC does not match."""
    valid = compute_crc(batch.raw, 0, batch.size) == batch.header.crc
    records = batch.records(verify_crc=False) if deep and valid else ()
    decoder = getattr(args, "decoder", None)
    if args.json:
        print_json({**batch_fields(batch, valid), **({"records": [
            record_fields(r, batch, decoder) for r in records]} if deep else {})})
        return valid
    print(" ".join(f"{k}: {_text(v)}" for k, v in _kafka_batch_line(batch, valid)))
    for record in records:
        line = _kafka_record_line(record, batch, decoder, args.print_data_log)
        print("| " + " ".join(f"{k}: {_text(v)}" for k, v in line))
    return valid


def batch_fields(batch: BatchView, valid: bool) -> dict[str, Any]:
    h = batch.header
    return {"base_offset": h.base_offset, "last_offset": h.last_offset,
            "count": h.records_count, "base_sequence": h.base_sequence,
            "last_sequence": h.last_sequence, "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch, "partition_leader_epoch":
            h.partition_leader_epoch, "is_transactional": h.is_transactional,
            "is_control": h.is_control, "delete_horizon_ms": h.base_timestamp
            if h.has_delete_horizon else None, "position": batch.position,
            "timestamp_type": _timestamp_type(h.timestamp_type.value),
            "max_timestamp": h.max_timestamp, "size": h.size, "magic": h.magic,
            "compression": h.compression.name.lower(), "crc": h.crc, "is_valid": valid}


def _kafka_batch_line(batch: BatchView, valid: bool) -> list[tuple[str, Any]]:
    f = batch_fields(batch, valid)
    return [("baseOffset", f["base_offset"]), ("lastOffset", f["last_offset"]),
            ("count", f["count"]), ("baseSequence", f["base_sequence"]),
            ("lastSequence", f["last_sequence"]), ("producerId", f["producer_id"]),
            ("producerEpoch", f["producer_epoch"]),
            ("partitionLeaderEpoch", f["partition_leader_epoch"]),
            ("isTransactional", f["is_transactional"]), ("isControl", f["is_control"]),
            ("deleteHorizonMs", f["delete_horizon_ms"]), ("position", f["position"]),
            (f["timestamp_type"], f["max_timestamp"]), ("size", f["size"]),
            ("magic", f["magic"]), ("compresscodec", f["compression"]), ("crc", f["crc"]),
            ("isvalid", f["is_valid"])]


def record_fields(record: Record, batch: BatchView, decoder: Decoder | None = None
                  ) -> dict[str, Any]:
    h = batch.header
    fields: dict[str, Any] = {
        "offset": record.offset, "timestamp": record.timestamp,
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
        "sequence": -1 if h.base_sequence < 0 else
        (h.base_sequence + record.offset - h.base_offset) % 0x80000000,
        "header_keys": [k for k, _ in record.headers]}
    if h.is_control:
        fields.update(_control_fields(record))
    elif decoder is not None:
        key, payload = decoder(record.key, record.value)
        fields.update(key=key, payload=payload)
    else:
        fields.update(key=_decoded(record.key), payload=_decoded(record.value),
                      headers=[[k, _decoded(v)] for k, v in record.headers])
    return fields


def _control_fields(record: Record) -> dict[str, Any]:
    kind = parse_control_record_type(record.key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return {"control_type": kind.name}
    try:
        marker = parse_end_transaction_marker(record)
    except (CorruptRecordError, ValueError) as exc:
        return {"control_type": kind.name, "error": str(exc)}
    return {"end_txn_marker": marker.type.name, "coordinator_epoch": marker.coordinator_epoch}


def _kafka_record_line(record: Record, batch: BatchView, decoder: Decoder | None,
                       contents: bool) -> list[tuple[str, Any]]:
    """Kafka's record line: metadata, then key and payload (when present) with `contents`."""
    f = record_fields(record, batch, decoder)
    line = [("offset", f["offset"]), (_timestamp_type(batch.header.timestamp_type.value),
                                      f["timestamp"]), ("keySize", f["key_size"]),
            ("valueSize", f["value_size"]), ("sequence", f["sequence"]),
            ("headerKeys", "[" + ",".join(f["header_keys"]) + "]")]
    if "end_txn_marker" in f:
        return [*line, ("endTxnMarker", f["end_txn_marker"]),
                ("coordinatorEpoch", f["coordinator_epoch"])]
    if "control_type" in f:
        return [*line, ("controlType", f["control_type"])]
    if not contents:
        return line
    key = [("key", f["key"])] if f["key"] is not None else []
    payload = [("payload", f["payload"])] if f["payload"] is not None else []
    return [*line, *key, *payload]


def _timestamp_type(value: int) -> str:
    return "LogAppendTime" if value == 1 else "CreateTime"


def _decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return "-" if value is None else str(value)


def _report_corrupt(path: Path, exc: CorruptRecordError, as_json: bool) -> None:
    if as_json:
        print_json({"file": str(path), "error": str(exc)})
    else:
        print(f"Found a damaged batch in {path}: {exc}")
