"""Test helper: read an offline W&B run file without the network (what a test checks was logged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_offline_run(path: str | Path) -> dict[str, dict[str, Any]]:
    """Metrics recorded in an offline W&B run file (``run-<id>.wandb``), without the network.

    The file is W&B's record log: a 7-byte header, then LevelDB-style 32 KiB blocks of chunks
    (crc32, length, type) holding protobuf ``Record`` messages. Returns ``{"history": last value
    of each logged key, "summary": the run summary}``, values decoded from JSON.
    """
    import json
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    block, pos, pending = 32768, 7, b""
    history: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(pending)
        which = record.WhichOneof("record_type")
        items = record.history.item if which == "history" else record.summary.update if which == "summary" else []
        target = history if which == "history" else summary
        for item in items:
            key = item.key or "/".join(item.nested_key)
            target[key] = json.loads(item.value_json)
    return {"history": history, "summary": summary}
