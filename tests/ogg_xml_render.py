"""Render oracle events as GoldenGate for Big Data XML operations (seed 000, section 13.5.2).

Test-only. One ``<operation>`` document per event, attributes in the formatter's order
(``table``, ``type``, ``ts``, ``current_ts``, ``pos``, ``numCols``), one ``<col name index>``
per column of the event's images, then ``<tokens>``. Insert: after only; update: before and
after; delete: before only; truncate: no ``col``.

The renderer varies every way the format lets a writer say the same thing, so that a reader
which only handles the seed's own spelling fails:

* a value as one CDATA section (``]]>`` inside it split over two sections, as a writer must) or
  as escaped text (``&lt;``, ``&amp;``, ``&gt;``; a carriage return always as ``&#13;``, since an
  XML parser turns a raw one into a newline, even inside CDATA);
* a missing image as ``missing='true'`` or as an absent element; a column missing from both
  images as ``<missing/>``; NULL as ``isNull='true'``; the empty string as an empty element;
* with or without the ``<?xml ...?>`` prolog, pretty-printed over several lines or one line.

``current_ts`` decreases through each file, so anything ordering by it gets the wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oracle import Event

PROLOG = "<?xml version='1.0' encoding='UTF-8'?>"
_CURRENT_TS_BASE = datetime(2016, 10, 5, 10, 15, 51)


def cdata(text: str) -> str:
    """``text`` as CDATA sections (``]]>`` split across two)."""
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def escaped(text: str, *, attribute: bool = False) -> str:
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")
    if attribute:
        out = out.replace("'", "&apos;").replace("\n", "&#10;").replace("\t", "&#9;")
    return out


def _image(tag: str, image: dict[str, Any] | None, col: str, variant: int) -> str | None:
    """One ``<before>``/``<after>`` element, or None to leave it out (missing)."""
    if image is None or col not in image:
        return f"<{tag} missing='true'/>" if variant % 2 == 0 else None
    value = image[col]
    if value is None:
        return f"<{tag} isNull='true'/>"
    text = str(value)
    if text == "" and variant % 3 == 0:
        return f"<{tag}/>"
    body = escaped(text) if "\r" in text or variant % 2 else cdata(text)
    return f"<{tag}>{body}</{tag}>"


def table_columns(events: Sequence[Event]) -> dict[str, list[str]]:
    """Every column each table's events carry, first-seen order (the table's "numCols")."""
    out: dict[str, list[str]] = {}
    for event in events:
        cols = out.setdefault(event.table, [])
        for image in (event.before, event.after):
            cols += [c for c in image or {} if c not in cols]
    return out


def render_operation(event: Event, columns: list[str], *, current_ts: str, variant: int, pretty: bool,
                     prolog: bool) -> str:
    """The XML document GoldenGate's ``xml`` formatter writes for ``event``.

    ``columns`` are the table's columns: one ``col`` each (a truncate has none); a column in
    neither image is written ``<missing/>`` or with both images marked missing.
    """
    if event.op not in ("I", "U", "D", "T"):
        raise ValueError(f"GoldenGate XML has no type {event.op!r}")
    if event.idx != 0:
        raise ValueError("GoldenGate writes one operation per document: idx must be 0")
    cols = [] if event.op == "T" else columns
    attrs = {"table": event.table, "type": event.op, "ts": event.op_ts, "current_ts": current_ts,
             "pos": event.pos, "numCols": str(len(columns))}
    head = "<operation " + " ".join(f"{k}='{escaped(v, attribute=True)}'" for k, v in attrs.items()) + ">"
    parts = [head]
    for index, col in enumerate(cols):
        v = variant + index
        present = any(img is not None and col in img for img in (event.before, event.after))
        if not present and v % 2:
            inner = ["<missing/>"]
        else:
            pairs = (("before", event.before), ("after", event.after))
            inner = [x for tag, img in pairs if (x := _image(tag, img, col, v)) is not None]
        parts.append(f" <col name='{escaped(col, attribute=True)}' index='{index}'>")
        parts += [f"   {x}" for x in inner]
        parts.append(" </col>")
    parts.append(" <tokens><token><Name><![CDATA[R]]></Name>"
                 f"<Value><![CDATA[AAD{variant:04d}]]></Value></token></tokens>")
    parts.append("</operation>")
    body = "\n".join(parts) if pretty else "".join(p.strip() for p in parts)
    return f"{PROLOG}\n{body}" if prolog else body


def render_ogg_xml(events: Sequence[Event], *, seed: int = 0) -> str:
    """The events as a stream of XML documents, in the given order; ``seed`` varies the spelling."""
    n = len(events)
    columns = table_columns(events)
    docs = []
    for i, event in enumerate(events):
        ts = f"{_CURRENT_TS_BASE + timedelta(milliseconds=n - i):%Y-%m-%dT%H:%M:%S.%f}"
        v = seed + i
        docs.append(render_operation(event, columns[event.table], current_ts=ts, variant=v,
                                     pretty=v % 3 != 1, prolog=v % 4 < 2))
    return "\n".join(docs) + "\n"


def write_xml_run(events: Sequence[Event], path: Path, *, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_ogg_xml(events, seed=seed), encoding="utf-8")
    return path
