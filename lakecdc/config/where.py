"""Where a key of a YAML file stands, so that a mistake in a job file or a data contract is
reported with its file, line and key (``jobs/sample.yaml:12: tables.keys: expected ...``)."""

from __future__ import annotations

import yaml

from lakecdc.errors import ConfigError


class Where:
    """Line numbers of a YAML document's mapping keys and values, for error messages."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines: dict[tuple[str, ...], int] = {}
        try:
            node = yaml.compose(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else path
            raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, at: tuple[str, ...]) -> None:
        self.lines.setdefault(at, node.start_mark.line + 1)  # a key's own line, not its value's
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                self.lines[(*at, str(k.value))] = k.start_mark.line + 1
                self._walk(v, (*at, str(k.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, (*at, str(i)))

    def error(self, at: tuple[str, ...], message: str) -> ConfigError:
        probe = at
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        key = ".".join(at) or "(top)"
        return ConfigError(f"{self.path}:{line or '?'}: {key}: {message}")
