"""The PySpark versions lakecdc runs on, checked when lakecdc is imported (this module's import).

PySpark is not a dependency of the plain package: a platform such as Databricks brings its own
Spark, and ``%pip install lakecdc`` must not replace it. Local installs take it from the ``spark``
extra (``pip install 'lakecdc[spark]'``). Every supported minor gives the same tables from the same
input; where Spark's behaviour differs between them, the code asks :data:`PYSPARK`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from lakecdc.errors import LakecdcError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

#: The oldest and the newest PySpark minor lakecdc is tested with (both included).
OLDEST: tuple[int, int] = (4, 0)
NEWEST: tuple[int, int] = (4, 3)

_SUPPORTED = f"{OLDEST[0]}.{OLDEST[1]}-{NEWEST[0]}.{NEWEST[1]}"
_INSTALL = "pip install 'lakecdc[spark]'"


def parse_version(text: str) -> tuple[int, int]:
    """The (major, minor) of a version string such as ``4.1.4``, ``4.2.0.dev1`` or ``4.0.0-db``."""
    found = re.match(r"\s*(\d+)\.(\d+)", text)
    if found is None:
        raise ValueError(f"not a version: {text!r}")
    return int(found.group(1)), int(found.group(2))


def unsupported(version: str | None) -> str | None:
    """Why PySpark ``version`` (None: not installed) cannot run lakecdc, in one line; None when it can."""
    if version is None:
        return f"lakecdc needs PySpark {_SUPPORTED}: {_INSTALL} (or run it where Spark is installed)"
    try:
        found = parse_version(version)
    except ValueError:
        return f"lakecdc needs PySpark {_SUPPORTED}; found a version it cannot read: {version!r}"
    if found < OLDEST:
        return f"lakecdc needs PySpark {_SUPPORTED}; found {version}, too old: {_INSTALL}"
    if found > NEWEST:
        return (f"lakecdc needs PySpark {_SUPPORTED}; found {version}, newer than lakecdc is tested "
                f"with: install a supported one ({_INSTALL}) or a lakecdc release that supports it")
    return None


class UnsupportedSpark(LakecdcError, ImportError):
    """The installed PySpark is missing or outside the supported versions; the message says which."""


def require_pyspark() -> tuple[int, int]:
    """The installed PySpark's (major, minor); :class:`UnsupportedSpark` when none or an unsupported one."""
    try:
        import pyspark
    except ImportError:
        version = None
    else:
        version = getattr(pyspark, "__version__", "unknown")
    problem = unsupported(version)
    if problem is not None:
        raise UnsupportedSpark(problem)
    assert version is not None
    return parse_version(version)


#: The installed PySpark's (major, minor), checked when lakecdc is imported; the few places whose
#: Spark calls differ by minor ask it.
PYSPARK: tuple[int, int] = require_pyspark()


def arrow_schema(schema: StructType) -> pa.Schema:
    """Spark's own Arrow schema for ``schema``, timestamps as UTC instants, on every supported minor.

    For the tables a grouped Arrow function (``applyInArrow``) returns. Up to 4.1 Spark's conversion
    gives timestamps the UTC zone by default; from 4.2 on it asks for the zone and fails without one.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    if PYSPARK >= (4, 2):
        zone: dict[str, Any] = {"timezone": "UTC"}  # a keyword of 4.2 on
        return to_arrow_schema(schema, **zone)
    return to_arrow_schema(schema)
