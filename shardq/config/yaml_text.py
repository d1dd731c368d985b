"""The config file's YAML: a strict SafeLoader (duplicate keys are errors) and one-line
errors that name the file, line and column."""

from __future__ import annotations

from typing import Any

import yaml

from shardq.config.values import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            line = key_node.start_mark.line + 1
            raise ConfigError("config", f"{key}: duplicate key at line {line}")
        seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse(text: str, origin: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader: no arbitrary objects
    except ConfigError as e:
        raise ConfigError(origin, e.problem) from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(origin, f"malformed YAML{at}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ConfigError(origin, f"malformed YAML: {' '.join(str(e).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(origin, f"top level must be a mapping of keys, got {type(data).__name__}")
    return data
