"""The README and docs/ stay true to the repository: short enough to read, links that resolve,
format names and options that the decoders know, commands that the CLI has."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lakecdc.cli import build_parser
from lakecdc.decode import DECODERS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
COMMAND = re.compile(r"(?:^|[\s/])lakecdc((?:[ \t]+[a-z][a-z0-9-]*)+)")


def prose(text: str) -> str:
    """``text`` without fenced blocks, indented code lines and code spans: what Markdown renders as
    links."""
    text = FENCE.sub("", text)
    text = "\n".join(line for line in text.splitlines() if not line.startswith("    "))
    return CODE_SPAN.sub("", text)


def code(text: str) -> list[str]:
    """The code of ``text``: fenced blocks, indented lines and code spans."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    lines = [line for line in rest.splitlines() if line.startswith("    ")]
    return blocks + lines + [m.group(0).strip("`") for m in CODE_SPAN.finditer(rest)]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces as
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors the headings of ``page`` define."""
    return {anchor(h) for h in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8")))}


def test_readme_is_short() -> None:
    """The README is the user's door, not a reference: under 320 lines."""
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 320, f"README.md has {lines} lines; move reference material to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of README.md and docs/*.md names a file of the repository that exists
    (never one outside it), and a link's #anchor names a heading of the page it points to."""
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if ROOT not in resolved.parents and resolved != ROOT:
            broken.append(f"{target}: outside the repository")
        elif not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{fragment} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def formats_table() -> list[tuple[list[str], list[str]]]:
    """The README's formats table as (format names, option names) per row."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Formats\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    rows = []
    for line in table[2:]:  # after the header and its separator
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`([^`]+)`", cells[0])
        options = [o.split("=", 1)[0] for o in re.findall(r"`([^`]+)`", cells[2])]
        rows.append((names, options))
    return rows


def test_formats_table_names_every_registered_format() -> None:
    """Every `--format` name in the README's formats table is a registered decoder, and every
    registered decoder has a row."""
    named = [name for names, _ in formats_table() for name in names]
    assert named, "no formats table under '## Formats' in README.md"
    unknown = sorted(set(named) - set(DECODERS))
    assert not unknown, f"README names formats that are not registered: {unknown}; registered: {sorted(DECODERS)}"
    missing = sorted(set(DECODERS) - set(named))
    assert not missing, f"registered formats missing from README's formats table: {missing}"


def test_formats_table_options_are_known() -> None:
    """Every option the README's formats table lists for a format is an option that format's
    decoder takes."""
    wrong = []
    for names, options in formats_table():
        for name in names:
            decoder = DECODERS[name]
            known = set(decoder.OPTIONS) | set(decoder.IGNORED_OPTIONS)
            wrong += [f"{name}: {o}" for o in options if o not in known]
    assert not wrong, f"README lists options its formats do not take: {wrong}"


def subcommands(parser: argparse.ArgumentParser | None) -> dict[str, argparse.ArgumentParser | None]:
    """The words that may follow ``parser``'s command: its subcommands with their parsers, else the
    choices of its first positional argument (``contract infer``), else none."""
    if parser is None:
        return {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    positional = [a for a in parser._actions if not a.option_strings and a.dest != "help"]
    if positional and positional[0].choices:
        return dict.fromkeys(positional[0].choices)
    return {}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_commands_exist(page: Path) -> None:
    """Every `lakecdc <command> [<subcommand>]` in the code of README.md and docs/*.md is a
    command of the CLI's parser (and a subcommand of it, for commands that have them)."""
    root = build_parser()
    assert subcommands(root), "the lakecdc parser has no subcommands"
    missing = set()
    seen = 0
    for snippet in code(page.read_text(encoding="utf-8")):
        for match in COMMAND.finditer(snippet):
            words = match.group(1).split()
            parser: argparse.ArgumentParser | None = root
            for depth, word in enumerate(words):
                choices = subcommands(parser)
                if not choices:
                    break
                if word not in choices:
                    missing.add("lakecdc " + " ".join(words[: depth + 1]))
                    break
                seen += 1
                parser = choices[word]
    if page == README:
        assert seen, "README names no lakecdc command"
    assert not missing, f"{page.relative_to(ROOT)} names commands the CLI does not have: {sorted(missing)}"
