"""Golden files: real and seed messages of each vendor, and the canonical events they decode to as
compact text (``tests/decode/<vendor>/golden/``).

Each vendor's ``golden/goldens.json`` names its goldens: ``{"<name>": {"format": ..., "inputs":
[files], "options": {...}, "dirs": {option: directory}, "from": "where the inputs come from"}}``
(``dirs``: options whose value is a directory beside the inputs). ``<name>.events`` holds one
:func:`helpers.brief` line (with ``detail``) per decoded record, in arrival order. Inputs are kept
byte for byte as published; a licence comment block at the start of a text input is skipped
here, as a user would, not by the decoder.

``pytest tests/decode/test_golden.py --update-goldens`` writes the ``.events`` files from what the
decoders give today: read the diff against ``semantics.md`` before committing it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

try:
    from tests.decode.helpers import briefs, decode
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from decode.helpers import briefs, decode  # type: ignore[no-redef]

HERE = Path(__file__).parent


def goldens() -> list[tuple[Path, str, dict]]:
    """``(golden directory, name, entry)`` of every vendor's ``goldens.json``."""
    out = []
    for manifest in sorted(HERE.glob("*/golden/goldens.json")):
        for name, entry in sorted(json.loads(manifest.read_text()).items()):
            out.append((manifest.parent, name, entry))
    return out


def without_licence(data: bytes) -> bytes:
    """``data`` without a leading ``/* ... */`` licence block (text inputs of other projects)."""
    stripped = data.lstrip()
    if stripped.startswith(b"/*") and b"*/" in stripped:
        return stripped[stripped.index(b"*/") + 2:].lstrip(b"\r\n")
    return data


@pytest.mark.spark
@pytest.mark.parametrize(("directory", "name", "entry"), goldens(),
                         ids=[f"{d.parent.name}/{n}" for d, n, _ in goldens()])
def test_decoding_matches_the_golden_events(spark, tmp_path, request, directory, name, entry):
    """The inputs decode to exactly the events of ``<name>.events``, record for record, with each
    bad record's reason and each skipped record's kind."""
    landing = tmp_path / "landing"
    landing.mkdir()
    paths = []
    for input_name in entry["inputs"]:
        path = landing / input_name
        path.write_bytes(without_licence((directory / input_name).read_bytes()))
        paths.append(path)
    options = {**entry.get("options", {}), **{k: str(directory / v) for k, v in entry.get("dirs", {}).items()}}
    got = briefs(decode(spark, entry["format"], paths, **options), detail=True)
    events = directory / f"{name}.events"
    if request.config.getoption("--update-goldens"):
        events.write_text("".join(line + "\n" for line in got), encoding="utf-8")
        return
    assert events.exists(), f"no {events}: run pytest {Path(__file__).name} --update-goldens, then review it"
    assert got == events.read_text(encoding="utf-8").splitlines()


def test_every_golden_input_is_named_in_a_manifest():
    """No golden input lies unused: every file of a ``golden/`` directory is a manifest, an input
    or a ``dirs`` directory's file of an entry, or an ``.events`` file of an entry."""
    for manifest in sorted(HERE.glob("*/golden/goldens.json")):
        directory = manifest.parent
        entries = json.loads(manifest.read_text())
        used = {manifest.name}
        for name, entry in entries.items():
            used |= {*entry["inputs"], f"{name}.events"}
            used |= {str(p.relative_to(directory)) for d in entry.get("dirs", {}).values()
                     for p in (directory / d).rglob("*") if p.is_file()}
        present = {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}
        assert sorted(present - used) == [], f"files of {directory} no golden names"
        assert sorted(used - present) == [], f"files {directory}/goldens.json names that are not there"
