"""Checks of the arguments of lakecdc's public functions other than settings (inputs, target,
session, callbacks): a wrong one is a :class:`~lakecdc.errors.ConfigError` naming the function,
the argument, what was given and what is expected, before anything starts, instead of a
``TypeError`` or ``AttributeError`` from deep inside a run."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from lakecdc.errors import ConfigError, InputNotFoundError


def _given(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def path(function: str, name: str, value: Any, example: str = "'lake/'") -> str:
    """``value`` as a path's text: a ``str`` or ``os.PathLike``, not empty."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{function}({name}={_given(value)}): expected a path (str or pathlib.Path), such as {example}")
    return value


def paths(function: str, name: str, value: Any) -> list[str]:
    """One path or a list of them, as a list of paths (at least one)."""
    if isinstance(value, (str, os.PathLike)):
        return [path(function, name, value, "'landing/'")]
    if isinstance(value, Sequence) and value and not isinstance(value, bytes):
        return [path(function, name, v, "'landing/'") for v in value]
    raise ConfigError(
        f"{function}({name}={_given(value)}): expected a file or directory, or a list of them, such as 'landing/'"
    )


def must_exist(paths: Sequence[str]) -> None:
    """An :class:`InputNotFoundError` for the first of ``paths`` that is not there (a glob may
    match nothing)."""
    for p in paths:
        if not any(c in p for c in "*?[") and not os.path.exists(p):
            raise InputNotFoundError(p)


def optional_callable(function: str, name: str, value: Any, takes: str) -> Callable[..., Any] | None:
    """None, or a function (``takes``: what it is called with, for the message)."""
    if value is not None and not callable(value):
        raise ConfigError(f"{function}({name}={_given(value)}): expected a function called with {takes}, or None")
    return value


def session(function: str, value: Any) -> Any:
    """None (the active session, else an embedded one) or a Spark session (classic or Connect)."""
    if value is not None and not (hasattr(value, "createDataFrame") and hasattr(value, "conf")):
        raise ConfigError(
            f"{function}(spark={_given(value)}): expected a SparkSession (the notebook's `spark`), or None "
            "for the active one"
        )
    return value


def dataframe(function: str, name: str, value: Any, example: str) -> Any:
    """A Spark DataFrame (classic or Connect)."""
    if not (hasattr(value, "withColumn") and hasattr(value, "columns")):
        raise ConfigError(f"{function}({name}={_given(value)}): expected a Spark DataFrame, such as {example}")
    return value
