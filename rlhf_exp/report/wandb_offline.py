"""Read a W&B offline run (`wandb/offline-run-*/run-*.wandb`) without syncing it.

wandb >= 0.18 (wandb-core) keeps an offline run's config and summary only in the .wandb
transaction log, not in files/config.yaml and files/wandb-summary.json. That log is LevelDB's log
format (32 KiB blocks of checksummed chunks) after a 7-byte header (":W&B", magic 0xBEE1, version 0),
each record a protobuf `wandb_internal_pb2.Record`. `python -m rlhf_exp.report.wandb_offline RUN_DIR` prints
what a run holds.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
CHUNK_HEADER = 7  # crc32 (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def iter_record_bytes(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = 7, b""
    while pos + CHUNK_HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # block trailer padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        if kind == 0:  # zero padding to the block end
            pos += left
            continue
        chunk = data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""


def _items(updates: Any) -> dict[str, Any]:
    return {(u.key or "/".join(u.nested_key)): json.loads(u.value_json) for u in updates}


def read_offline_run(run_dir: Path) -> dict[str, Any]:
    """{"run": {group, job_type, tags, name}, "config": {...}, "summary": {...}, "history_rows": N, "history_keys":
    [every key logged as history], "exit_code"}."""
    from wandb.proto import wandb_internal_pb2 as pb

    (log,) = run_dir.glob("run-*.wandb")
    out: dict[str, Any] = {"run": {}, "config": {}, "summary": {}, "history_rows": 0, "history_keys": [], "exit_code": None}
    for raw in iter_record_bytes(log):
        record = pb.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            out["run"] = {"group": r.run_group, "job_type": r.job_type, "tags": list(r.tags), "name": r.display_name}
            out["config"].update(_items(r.config.update))
        elif kind == "config":
            out["config"].update(_items(record.config.update))
        elif kind == "summary":
            out["summary"].update(_items(record.summary.update))
        elif kind == "history":
            out["history_rows"] += 1
            out["history_keys"] += [k for k in _items(record.history.item) if k not in out["history_keys"]]
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out


def run_dirs(path: Path) -> list[Path]:
    """The W&B run dirs a path names: a run dir itself, or a job dir (or any dir) holding offline runs."""
    if list(path.glob("run-*.wandb")):
        return [path]
    return sorted(p.parent for p in path.glob("**/run-*.wandb"))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m rlhf_exp.report.wandb_offline <W&B run dir, or a job dir holding runs>", file=sys.stderr)
        return 2
    runs = run_dirs(Path(argv[0]))
    if not runs:
        print(f"error: no W&B offline run (run-*.wandb) under {argv[0]}", file=sys.stderr)
        return 2
    read = [read_offline_run(run) for run in runs]
    print(json.dumps(read[0] if len(read) == 1 else read, indent=1, default=str))  # whole: always valid JSON
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
