"""The exception tree. Every error carries the data a person needs to act on it."""

from __future__ import annotations


class LakecdcError(Exception):
    """Base class of every error lakecdc raises on purpose."""


class ConfigError(LakecdcError, ValueError):
    """A setting, option or argument is wrong (unknown format, bad option value, ...)."""


class InputNotFoundError(ConfigError, FileNotFoundError):
    """An input file or directory named by the caller does not exist."""

    def __init__(self, path: str, what: str = "input") -> None:
        self.path = path
        super().__init__(f"{what} {path!r} does not exist")


class UnknownFormatError(ConfigError):
    """A format name that is not registered; the message lists the known ones."""

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        super().__init__(f"unknown format {name!r}; known formats: {', '.join(known)}")


class MissingKeyError(LakecdcError):
    """A table has no primary key: the messages carry none and none was configured."""

    def __init__(self, table: str) -> None:
        self.table = table
        super().__init__(
            f"table {table!r}: no primary key known: its messages carry no primary_keys and "
            f"none was configured; pass --key {table}=COL[,COL...] (or keys={{{table!r}: [...]}})"
        )


class PrimaryKeyUpdateError(LakecdcError):
    """A primary-key update met ``pk_update="abend"``; nothing of the batch was committed."""

    def __init__(self, table: str, old_key: object, new_key: object, pos: str | None) -> None:
        self.table = table
        self.old_key = old_key
        self.new_key = new_key
        self.pos = pos
        super().__init__(
            f"table {table!r}: primary-key update from {old_key!r} to {new_key!r} at position "
            f"{pos} and pk_update='abend'; nothing of this batch was committed. Use "
            f"--pk-update delete-insert (or update) to apply key changes"
        )


class DecodeError(LakecdcError):
    """A record could not be decoded. Raised only where quarantining is impossible."""

    def __init__(self, fmt: str, source: str, line: int | None, reason: str) -> None:
        self.format = fmt
        self.source = source
        self.line = line
        self.reason = reason
        where = f"line {line} of {source}" if line is not None else source
        super().__init__(f"{fmt}: {where}: {reason}")


class CommitConflict(LakecdcError):
    """A Delta commit failed because another writer committed first (retry the run)."""


class InputChangedError(LakecdcError):
    """An input file recorded by an unfinished run is gone or was changed before the resume."""


def explain(exc: BaseException) -> str:
    """``exc`` as a person should read it: a lakecdc error's own text; for a failure of Spark's
    Python workers that cannot import a module, what is wrong and what to set (a session built
    by hand runs its workers on the ``python3`` on PATH unless ``PYSPARK_PYTHON`` says otherwise,
    often without pyarrow or lakecdc)."""
    if isinstance(exc, LakecdcError):
        return str(exc)
    text = str(exc)
    marker = "ModuleNotFoundError: No module named "
    if type(exc).__name__ == "PythonException" and marker in text:
        import sys

        module = text.split(marker, 1)[1].split("\n", 1)[0].strip()
        return (
            f"Spark's Python workers cannot import {module}: they run another Python than this "
            f"one ({sys.executable}). Set PYSPARK_PYTHON={sys.executable} (environment, or "
            f"spark.pyspark.python) before the session starts, or install lakecdc's dependencies "
            f"in the workers' Python"
        )
    return f"{type(exc).__name__}: {text}"
