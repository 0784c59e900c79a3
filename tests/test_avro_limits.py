"""Avro object container files that would exhaust a worker: a block that inflates far past its
size (a compression bomb) and a block header claiming 2^62 records. Each such block is one
quarantined record whose reason names the limit (and the option that raises it); the file's other
blocks apply. The limits are lowered in the tests so that the bombs stay small."""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.decode import get_decoder
from lakecdc.decode.avro.containers import (
    BlockLimits,
    BlockTooLarge,
    decompress,
    iter_ocf_blocks,
    min_datum_bytes,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path

try:
    from tests.dts_render import SCHEMA as DTS_SCHEMA
    from tests.dts_render import encode, integer, pk_tag, record
    from tests.helpers import rows
    from tests.ogg_avro_render import op_record, op_schema
    from tests.oracle import Event
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from dts_render import SCHEMA as DTS_SCHEMA  # type: ignore[no-redef]
    from dts_render import encode, integer, pk_tag, record  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]
    from ogg_avro_render import op_record, op_schema  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]

SCHEMA = op_schema("GG.CUST", {"ID": "long", "NAME": "string"})


def _long(n: int) -> bytes:
    """An Avro ``long`` (zig-zag varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def _event(i: int) -> Event:
    return Event("GG.CUST", "I", f"2020-01-01 00:00:{i:02d}.000000", f"{i:020d}", after={"ID": i, "NAME": f"n{i}"},
                 keys=("ID",))


def _records(*ids: int) -> bytes:
    out = io.BytesIO()
    parsed = fastavro.parse_schema(SCHEMA)
    for i in ids:
        fastavro.schemaless_writer(out, parsed, op_record(_event(i), SCHEMA))
    return out.getvalue()


def write_ocf(path: Path, blocks: list[tuple[int, bytes]], schema: Any = None) -> tuple[Path, list[int]]:
    """An OCF file (deflate) of the given ``(record count, compressed records)`` blocks, as they
    are (a count need not match); returns the path and each block's byte offset."""
    head = io.BytesIO()
    fastavro.writer(head, fastavro.parse_schema(SCHEMA) if schema is None else schema, [], codec="deflate")
    data = head.getvalue()
    header = read_ocf_header(io.BytesIO(data))
    data = data[: header.length]
    offsets = []
    for count, body in blocks:
        offsets.append(len(data))
        data += _long(count) + _long(len(body)) + body + header.sync
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path, offsets


def good(*ids: int) -> tuple[int, bytes]:
    return len(ids), _deflate(_records(*ids))


#: a block whose one "record" inflates to 4 MiB of zeros from about 4 KB: past a 1 MiB limit
BOMB = (1, _deflate(bytes(4 << 20)))


def quarantine(target: Path) -> list[dict[str, Any]]:
    q = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table()).to_pylist()
    return sorted(q, key=lambda r: (r["file"], r["offset"]))


# -- decompression with a limit ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["null", "deflate", "bzip2", "xz", "zstandard", "snappy"])
def test_decompression_stops_at_the_limit_for_every_codec(codec):
    import cramjam

    plain = bytes(64 << 10)
    packed = {
        "null": plain, "deflate": _deflate(plain), "bzip2": bz2.compress(plain), "xz": lzma.compress(plain),
        "zstandard": bytes(cramjam.zstd.compress(plain)),
        "snappy": bytes(cramjam.snappy.compress_raw(plain)) + zlib.crc32(plain).to_bytes(4, "big"),
    }[codec]
    assert decompress(codec, packed) == plain
    assert decompress(codec, packed, len(plain)) == plain  # exactly at the limit: fine
    with pytest.raises(BlockTooLarge, match=rf"past {len(plain) - 1} bytes.*maxBlockBytes={len(plain) - 1}"):
        decompress(codec, packed, len(plain) - 1)


def test_a_deflate_bomb_is_not_inflated_past_the_limit():
    """4 MiB from 4 KB: refused after the limit's bytes, whatever the block would give."""
    _count, body = BOMB
    assert len(body) < 8 << 10
    with pytest.raises(BlockTooLarge):
        decompress("deflate", body, 1 << 20)


def test_the_fewest_bytes_a_record_takes():
    assert min_datum_bytes(SCHEMA) >= 5  # strings, a long, an array, a map, two union indexes
    assert min_datum_bytes("null") == 0
    assert min_datum_bytes({"type": "record", "name": "E", "fields": []}) == 0
    assert min_datum_bytes({"type": "fixed", "name": "F", "size": 16}) == 16
    linked = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "long"},
                                                           {"name": "next", "type": ["null", "Node"]}]}
    assert min_datum_bytes(linked) == 2


def test_limits_come_from_the_decoder_options():
    assert get_decoder("ogg-avro-op", {"maxBlockBytes": "1024"}).limits == BlockLimits(1024, BlockLimits().max_block_records)
    assert get_decoder("debezium-avro", {"maxBlockRecords": "5"}).limits.max_block_records == 5
    assert get_decoder("dts-avro", {}).limits == BlockLimits()
    with pytest.raises(ConfigError, match="maxBlockBytes"):
        get_decoder("ogg-avro-op", {"maxBlockBytes": "lots"})


# -- blocks of a file --------------------------------------------------------------------------------------


def test_bad_blocks_are_refused_and_the_other_blocks_read(tmp_path):
    path, offsets = write_ocf(tmp_path / "f.avro", [good(1, 2), BOMB, (2**62, _deflate(_records(3))), good(4)])
    limits = BlockLimits(max_block_bytes=1 << 20)
    with open(path, "rb") as fh:
        header = read_ocf_header(fh)
        blocks = list(iter_ocf_blocks(fh, header, header.length, path.stat().st_size, limits))
    assert [(b.offset, b.count, b.error is None) for b in blocks] == [
        (offsets[0], 2, True), (offsets[1], 1, False), (offsets[2], 1, False), (offsets[3], 1, True)]
    assert "inflates past 1048576 bytes" in blocks[1].error and "maxBlockBytes" in blocks[1].error
    assert blocks[2].error.startswith(f"the block claims {2**62} records, more than the limit")
    assert "maxBlockRecords" in blocks[2].error
    # the planner numbers the records as the reader does: the claimed 2^62 count as one
    _header, splits = plan_ocf_splits(str(path), 1, limits)
    assert [first for _start, _length, first in splits] == [0, 2, 3, 4]


def test_a_count_the_bytes_cannot_hold_is_refused(tmp_path):
    """Fewer records than the limit, but more than the block's bytes hold: never read as empty records."""
    path, _offsets = write_ocf(tmp_path / "f.avro", [(5000, _deflate(_records(1) + bytes(100))), good(2)])
    with open(path, "rb") as fh:
        header = read_ocf_header(fh)
        blocks = list(iter_ocf_blocks(fh, header, header.length, path.stat().st_size))
    assert [b.error is None for b in blocks] == [False, True]
    assert blocks[0].error.startswith("the block claims 5000 records but holds ")


@pytest.mark.spark
def test_bombs_are_quarantined_naming_the_limit_and_the_rest_applies(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    path, offsets = write_ocf(landing / "cust.avro", [
        good(1, 2), BOMB, (2**62, _deflate(_records(3))), good(4), (5000, _deflate(_records(5))), good(6)])
    s = lakecdc.apply(landing, target, format="ogg-avro-op", keys={"GG.CUST": ["ID"]},
                      options={"maxBlockBytes": str(1 << 20)}, spark=spark)
    assert rows(s.table("GG.CUST").target, "ID") == [{"ID": i, "NAME": f"n{i}"} for i in (1, 2, 4, 6)]
    q = quarantine(target)
    assert [r["offset"] for r in q] == offsets[1:3] + offsets[4:5]
    assert "inflates past 1048576 bytes, the limit (option maxBlockBytes=1048576" in q[0]["reason"]
    assert f"claims {2**62} records, more than the limit of 10000000 (option maxBlockRecords" in q[1]["reason"]
    assert "claims 5000 records but holds" in q[2]["reason"]
    assert s.quarantined_unrouted == 3 and s.table("GG.CUST").events == 4


@pytest.mark.spark
def test_the_kafka_avro_decoders_take_the_limits_too(spark, tmp_path):
    """debezium-avro and dts-avro read OCF blocks through the same limits: a bomb and a block
    claiming 2^62 records are one error each, the good block between them decodes."""
    # debezium-avro takes any sink's OCF file (here records of another schema: each an error too)
    path, _offsets = write_ocf(tmp_path / "x.avro", [BOMB, (2**62, b"\x00")])
    found = lakecdc.read_changes([str(path)], format="debezium-avro", options={"maxBlockBytes": str(1 << 20)},
                                 spark=spark).orderBy("_offset").collect()
    errors = [r["_error"] for r in found if r["_error"] is not None]
    assert len(errors) == 2 and "maxBlockBytes=1048576" in errors[0] and "maxBlockRecords" in errors[1], errors

    insert = record("INSERT", "shop.t", [("id", 3)], after=[integer(7)], tags=pk_tag("id"))
    path, offsets = write_ocf(tmp_path / "dts.avro", [BOMB, (1, _deflate(encode(insert))), (2**62, b"\x00")],
                              schema=DTS_SCHEMA)
    found = lakecdc.read_changes([str(path)], format="dts-avro", options={"maxBlockBytes": str(1 << 20)},
                                 spark=spark).orderBy("_offset").collect()
    assert [(r["_offset"], r["op"], r["_error"] is None) for r in found] == [
        (offsets[0], None, False), (offsets[1], "I", True), (offsets[2], None, False)]
    assert "maxBlockBytes=1048576" in found[0]["_error"] and "maxBlockRecords" in found[2]["_error"]
    assert found[1]["after"] == {"id": "7"}



def test_a_cut_stream_is_still_an_error_with_a_limit():
    plain = b"abc" * 10_000
    for codec, packed in (("deflate", _deflate(plain)), ("bzip2", bz2.compress(plain)), ("xz", lzma.compress(plain))):
        with pytest.raises(ValueError, match="incomplete or truncated"):
            decompress(codec, packed[:-8], 1 << 20)
    # concatenated streams read whole, as bz2.decompress reads them
    assert decompress("bzip2", bz2.compress(plain) + bz2.compress(b"xyz"), 1 << 20) == plain + b"xyz"


def test_a_zstandard_stream_without_its_size_is_read_and_bounded():
    """Java's Avro writes zstandard blocks with a streaming compressor: no content size in the frame."""
    import cramjam

    plain = bytes(range(256)) * 4000
    streaming = cramjam.zstd.Compressor()
    streaming.compress(plain)
    packed = bytes(streaming.finish())
    assert decompress("zstandard", packed, 1 << 20) == plain
    with pytest.raises(BlockTooLarge):
        decompress("zstandard", packed, 5000)
