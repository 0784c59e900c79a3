"""GoldenGate Java adapter properties files: the formatter's settings, read the GoldenGate way.

A replicat's handler is configured in a Java properties file::

    gg.handlerlist=hdfs
    gg.handler.hdfs.type=hdfs
    gg.handler.hdfs.format=delimitedtext
    gg.handler.hdfs.format.fieldDelimiter=CDATA[\\u0001]
    gg.handler.hdfs.format.includeColumnNames=true

:func:`read_gg_properties` picks the handler (the one named, else the only one with a ``format``),
maps its ``format`` to a lakecdc format name (``json`` -> ``ogg-json``, ``json_row`` ->
``ogg-json-row``, ``delimitedtext`` -> ``ogg-delimited``, ``xml`` -> ``ogg-xml``, ``avro_row`` /
``avro_op`` (also ``*_ocf``) -> ``ogg-avro-row`` / ``ogg-avro-op``) and returns every
``gg.handler.<name>.format.<property>`` as an option. The decoder then refuses any property it does
not know, naming the known ones, so a misspelt property is reported instead of silently ignored.
The seed's own Avro sample writes ``gg.hdfs.format=avro_op`` (without ``handler``): accepted too.

The file follows ``java.util.Properties``: ``#``/``!`` comments, ``=``, ``:`` or whitespace between
key and value, a trailing backslash continues a line, ``\\uXXXX`` and ``\\t \\n \\r \\f`` escapes.
"""

from __future__ import annotations

import re
from pathlib import Path

from lakecdc.errors import ConfigError

#: GoldenGate's ``gg.handler.<name>.format`` values and the lakecdc format each one is read with.
GG_FORMATS = {
    "json": "ogg-json",
    "json_row": "ogg-json-row",
    "delimitedtext": "ogg-delimited",
    "xml": "ogg-xml",
    "avro_row": "ogg-avro-row",
    "avro_op": "ogg-avro-op",
    "avro_row_ocf": "ogg-avro-row",
    "avro_op_ocf": "ogg-avro-op",
}

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """``text`` as ``java.util.Properties`` would load it (later keys win)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        ch = line[j]
        if ch == "\\":
            j += 2
            continue
        if ch in "=: \t\f":
            break
        j += 1
    key, rest = line[:j], line[j:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        if body.startswith("u"):
            return chr(int(body[1:], 16))
        return _ESCAPES.get(body, body)

    return re.sub(r"\\(u[0-9A-Fa-f]{4}|.)", one, text)


def read_gg_properties(path: str | Path, handler: str | None = None) -> tuple[str, dict[str, str]]:
    """The lakecdc format and format options of ``handler`` in the properties file at ``path``.

    Raises:
        ConfigError: no or several handlers with a format (name one), an unknown handler or format.
    """
    props = parse_properties(Path(path).read_text(encoding="utf-8"))
    formats: dict[str, str] = {}
    for key, value in props.items():
        m = re.fullmatch(r"gg\.(?:handler\.)?([^.]+)\.format", key)
        if m:
            formats.setdefault(m.group(1), value.strip())
    listed = [h.strip() for h in props.get("gg.handlerlist", "").split(",") if h.strip()]
    if handler is None:
        candidates = [h for h in (listed or sorted(formats)) if h in formats]
        if len(candidates) != 1:
            raise ConfigError(
                f"{path}: {'no handler has' if not candidates else 'several handlers have'} a format "
                f"({', '.join(candidates) or 'none'}); name one with --gg-handler"
            )
        handler = candidates[0]
    if handler not in formats:
        raise ConfigError(f"{path}: handler {handler!r} has no gg.handler.{handler}.format; handlers with one: "
                          f"{', '.join(sorted(formats)) or 'none'}")
    gg_format = formats[handler]
    if gg_format not in GG_FORMATS:
        raise ConfigError(f"{path}: gg.handler.{handler}.format={gg_format!r} is not one of {', '.join(GG_FORMATS)}")
    prefix = f"gg.handler.{handler}.format."
    options = {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}
    return GG_FORMATS[gg_format], options
