"""Decoding: vendor change messages in, canonical change events out; the registry of formats.

Vendor packages (``goldengate``, ``debezium``, ``alibaba``, ``qlik``) stand on vendor-neutral
transport packages (``files``, ``kafka``, ``avro``) and on one base flow
(:class:`~lakecdc.decode.base.Decoder`) that owns the projection into the canonical event
(:func:`~lakecdc.decode.event.project`).

>>> sorted(DECODERS)[:2]
['canal-json', 'debezium-avro']
>>> get_decoder("ogg-json", {"flatten": "true"}).name
'ogg-json'
"""

from __future__ import annotations

from collections.abc import Mapping

from lakecdc.decode.alibaba.canal import CanalJsonDecoder
from lakecdc.decode.alibaba.dts import DtsAvroDecoder
from lakecdc.decode.alibaba.shareplex import SharePlexJsonDecoder
from lakecdc.decode.base import Decoder
from lakecdc.decode.debezium.avro import DebeziumAvroDecoder
from lakecdc.decode.debezium.json import DebeziumJsonDecoder
from lakecdc.decode.goldengate.avro import OggAvroOpDecoder, OggAvroRowDecoder
from lakecdc.decode.goldengate.delimited import OggDelimitedDecoder
from lakecdc.decode.goldengate.json import OggJsonDecoder
from lakecdc.decode.goldengate.json_row import OggJsonRowDecoder
from lakecdc.decode.goldengate.xml import OggXmlDecoder
from lakecdc.decode.qlik.decoders import QlikAvroDecoder, QlikJsonDecoder
from lakecdc.errors import UnknownFormatError

#: Every format, by the name ``--format`` takes.
DECODERS: dict[str, type[Decoder]] = {
    CanalJsonDecoder.name: CanalJsonDecoder,
    SharePlexJsonDecoder.name: SharePlexJsonDecoder,
    OggJsonDecoder.name: OggJsonDecoder,
    OggAvroRowDecoder.name: OggAvroRowDecoder,
    OggAvroOpDecoder.name: OggAvroOpDecoder,
    OggJsonRowDecoder.name: OggJsonRowDecoder,
    OggDelimitedDecoder.name: OggDelimitedDecoder,
    OggXmlDecoder.name: OggXmlDecoder,
    DebeziumJsonDecoder.name: DebeziumJsonDecoder,
    DebeziumAvroDecoder.name: DebeziumAvroDecoder,
    QlikJsonDecoder.name: QlikJsonDecoder,
    QlikAvroDecoder.name: QlikAvroDecoder,
    DtsAvroDecoder.name: DtsAvroDecoder,
}


def get_decoder(name: str, options: Mapping[str, str] | None = None) -> Decoder:
    """The decoder registered as ``name``, configured with ``options``.

    Raises:
        UnknownFormatError: ``name`` is not registered; the message lists the known names.
    """
    try:
        cls = DECODERS[name]
    except KeyError:
        raise UnknownFormatError(name, sorted(DECODERS)) from None
    return cls(options)


__all__ = ["DECODERS", "Decoder", "get_decoder"]
