"""Data contracts checked against the published Open Data Contract Standard JSON schema.

The schemas are Bitol's own (``schema/odcs-json-schema-*.json`` of
github.com/bitol-io/open-data-contract-standard, Apache-2.0), bundled under
``lakecdc/check/schemas/``. A contract is validated with the schema of its ``apiVersion``:

==============  ==============================================================================
apiVersion      schema
==============  ==============================================================================
v3.0.x          ``odcs-json-schema-v3.0.2-strict.json`` (v3.0.2, unknown fields rejected)
v3.1.x          ``odcs-json-schema-v3.1.0.json``
==============  ==============================================================================

Other versions (v3.2 is not published yet) are rejected by name.

A misspelt field (``primarykey``), an unknown value (``logicalType: strin``) or a missing one
(``id``) is a :class:`~lakecdc.errors.ConfigError` naming the file, the line, the path in the
document and the schema's own message.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakecdc.config.where import Where

SCHEMAS = {
    "v3.0": "odcs-json-schema-v3.0.2-strict.json",
    "v3.1": "odcs-json-schema-v3.1.0.json",
}
#: the schema for a contract whose apiVersion is missing (the schema then says it is required)
DEFAULT = "v3.1"


def schema_for(api_version: Any) -> str:
    """The bundled schema's file name for a contract's ``apiVersion`` (``v3.1.0`` -> v3.1's)."""
    text = str(api_version) if api_version is not None else DEFAULT
    return SCHEMAS.get(".".join(text.split(".")[:2]), SCHEMAS[DEFAULT])


@cache
def _validator(name: str) -> Any:
    from jsonschema.validators import validator_for

    schema = json.loads(resources.files("lakecdc.check").joinpath("schemas", name).read_text())
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _plain(value: Any) -> Any:
    """The document as JSON would hold it: YAML's dates and times as ISO text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def validate(data: dict, where: Where) -> None:
    """Raise a :class:`~lakecdc.errors.ConfigError` for the first mistake the ODCS schema finds
    (the most specific one), naming ``file:line``, the path in the document and the schema's message."""
    from jsonschema.exceptions import best_match

    api = data.get("apiVersion")
    if api is not None and ".".join(str(api).split(".")[:2]) not in SCHEMAS:
        raise where.error(("apiVersion",), f"{api!r}: lakecdc validates ODCS {' and '.join(SCHEMAS)} contracts "
                                           "(the published JSON schemas)")
    name = schema_for(api)
    errors = list(_validator(name).iter_errors(_plain(data)))
    if not errors:
        return
    # a field left unevaluated is often only the echo of a branch that failed: the cause comes first
    causes = [e for e in errors if e.validator != "unevaluatedProperties"]
    error = best_match(causes or errors)
    assert error is not None
    at = tuple(str(p) for p in error.absolute_path)
    message = error.message
    if error.context and all(c.validator == "required" for c in error.context):  # oneOf / anyOf of fields
        wanted = [str(c.validator_value[0]) for c in error.context if c.validator_value]
        message = f"needs one of {', '.join(dict.fromkeys(wanted))}"
    unexpected = re.findall(r"'([^']+)' (?:was|were) unexpected", error.message)
    if len(unexpected) == 1 and isinstance(error.instance, dict) and unexpected[0] in error.instance:
        at = (*at, unexpected[0])  # the misspelt field's own line
    version = name.removeprefix("odcs-json-schema-").removesuffix(".json")
    raise where.error(at, f"{message} (ODCS JSON schema {version})")
