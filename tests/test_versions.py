"""The PySpark versions lakecdc accepts, and how it says it cannot run on another one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lakecdc.spark.versions import (
    NEWEST,
    OLDEST,
    UnsupportedSpark,
    parse_version,
    require_pyspark,
    unsupported,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, expected", [("4.0.5", (4, 0)), ("4.3.0", (4, 3)), ("4.2.0.dev1", (4, 2)),
                                            ("4.1.0-db", (4, 1)), ("10.12.1", (10, 12))])
def test_parse_version(text, expected):
    """Major and minor come from the leading numbers, whatever follows them."""
    assert parse_version(text) == expected


@pytest.mark.parametrize("version", ["4.0.0", "4.0.5", "4.1.4", "4.2.1", "4.3.0", "4.3.7"])
def test_supported_versions_pass(version):
    """Every release of the minors from 4.0 to 4.3 is accepted."""
    assert unsupported(version) is None


def test_missing_pyspark_says_how_to_install():
    """Without PySpark the message names the supported range and the extra that installs it."""
    message = unsupported(None)
    assert message is not None
    assert message.startswith("lakecdc needs PySpark 4.0-4.3: pip install 'lakecdc[spark]'")
    assert "\n" not in message


@pytest.mark.parametrize("version, word", [("3.5.1", "too old"), ("4.4.0", "newer"), ("5.0.0", "newer")])
def test_unsupported_version_is_named(version, word):
    """An old or too new PySpark is refused in one line naming the version found and the range."""
    message = unsupported(version)
    assert message is not None and "\n" not in message
    assert f"found {version}" in message and word in message and "PySpark 4.0-4.3" in message


def test_range_matches_the_spark_extra():
    """The range checked at import is the one the ``spark`` and ``dev`` extras install."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("pyspark") for dep in project["dependencies"])
    spec = f"pyspark>={OLDEST[0]}.{OLDEST[1]},<{NEWEST[0]}.{NEWEST[1] + 1}"
    assert project["optional-dependencies"]["spark"] == [spec]
    assert spec in project["optional-dependencies"]["dev"]


def test_installed_pyspark_is_supported():
    """The PySpark this suite runs on passes the check and reports its minor."""
    import pyspark

    assert require_pyspark() == parse_version(pyspark.__version__)


@pytest.mark.parametrize("fake", [None, "3.5.3", "4.4.0"])
def test_import_fails_in_one_line(fake):
    """``import lakecdc`` without PySpark, or with an unsupported one, raises UnsupportedSpark (an
    ImportError) whose message is the check's one line."""
    if fake is None:
        setup = "sys.modules['pyspark'] = None"
    else:
        setup = f"sys.modules['pyspark'] = types.SimpleNamespace(__version__={fake!r})"
    code = (f"import sys, types; {setup}\n"
            "try:\n    import lakecdc\nexcept ImportError as e:\n"
            "    print(type(e).__name__); print(e)\nelse:\n    print('imported')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.splitlines()
    assert out == ["UnsupportedSpark", unsupported(fake)]


def test_require_pyspark_raises_for_missing(monkeypatch):
    """The check itself, with PySpark hidden: UnsupportedSpark, also a lakecdc error."""
    from lakecdc.errors import LakecdcError

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(UnsupportedSpark, match="needs PySpark 4.0-4.3") as caught:
        require_pyspark()
    assert isinstance(caught.value, LakecdcError) and isinstance(caught.value, ImportError)
