"""Read a Megatron-Bridge or flat Megatron-LM YAML config into canonical keys with file:line.

The file is *composed*, not constructed: tags such as `!!python/object/apply` are kept as plain data and
nothing in the file is ever executed. Alias expansion is bounded so an alias bomb cannot exhaust memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from offloaddoctor.config.files import read_config_text
from offloaddoctor.config.keys import BRIDGE_FALLBACKS, canonical_key
from offloaddoctor.config.values import ConfigValue, Source
from offloaddoctor.config.mixups import log_given_as_config
from offloaddoctor.errors import UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs start-up time
    from typing import Any

MAX_NODES = 200_000  # after alias expansion
# As written: a Bridge run_config.yaml holds under a thousand (737 in fixtures/configs); each costs ~40 µs to
# scan and compose in pure Python, so the limit is reached in about a second.
MAX_COMPOSED_NODES = 20_000
_STANDARD_SCALAR_TAGS = {"tag:yaml.org,2002:" + name for name in ("str", "int", "float", "bool", "null", "timestamp")}
_constructor = yaml.constructor.SafeConstructor()
_TOO_DEEP = "{path}: config nests lists or mappings too deeply to read (hundreds of levels; a run config has a few)"


def load_yaml_config(path: str, origin: str = "config") -> list[ConfigValue]:
    return parse_yaml_config(read_config_text(path), path, origin)


class _CountingLoader(yaml.SafeLoader):
    """Counts nodes as they are composed: a 1 MiB flow list of 500k items is refused at the limit, in a
    fraction of a second, not after PyYAML built all of it (12 s and 350 MB)."""

    def __init__(self, stream: str, path: str) -> None:
        super().__init__(stream)
        self.nodes_left = MAX_COMPOSED_NODES
        self.config_path = path

    def compose_node(self, parent, index):
        if not self.check_event(yaml.AliasEvent):  # an alias reuses a node: its expansion is _walk's budget
            self.nodes_left -= 1
            if self.nodes_left < 0:
                raise UserError(
                    f"{self.config_path}: config has more than {MAX_COMPOSED_NODES:,} values (keys, list items); "
                    "a run config has about a thousand; refusing to read it"
                )
        return super().compose_node(parent, index)


def _compose(text: str, path: str) -> yaml.Node | None:
    loader = _CountingLoader(text, path)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def safe_load_bounded(text: str, path: str) -> Any:
    """Data as `yaml.safe_load` gives it, under the guards configs are read with: at most MAX_COMPOSED_NODES
    as written and MAX_NODES after alias expansion (an alias bomb of 400 bytes would build 2.5 GB), no
    duplicate key (UserError). A tag SafeLoader does not know is its yaml.YAMLError; RecursionError passes."""
    root = _compose(text, path)
    if root is None:
        return None
    _plain(root, [MAX_NODES], path)  # spends the expansion budget before anything is built
    return yaml.constructor.SafeConstructor().construct_document(root)


def parse_yaml_config(text: str, path: str, origin: str = "config") -> list[ConfigValue]:
    """Read config text; `path` labels the sources (a file, or `REV:path` for a git object)."""
    try:
        root = _compose(text, path)
    except RecursionError:  # PyYAML composes nested collections recursively
        raise UserError(_TOO_DEEP.format(path=path)) from None
    except yaml.MarkedYAMLError as exc:
        mixup = log_given_as_config(path, text)
        if mixup is not None:
            raise mixup from None
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else path
        raise UserError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if root is None:
        raise UserError(f"{path}: config is empty")
    if not isinstance(root, yaml.MappingNode):
        mixup = log_given_as_config(path, text)
        if mixup is not None:
            raise mixup
        overrides = isinstance(root, yaml.SequenceNode) and all(
            isinstance(item, yaml.ScalarNode) and "=" in str(item.value) for item in root.value[:_LISTED]
        )
        hint = (
            "; this is a list of KEY=VALUE overrides (Hydra's overrides.yaml): give the run's config file, or the "
            "overrides offloaddoctor knows with --set"
            if overrides and root.value
            else ""
        )
        raise UserError(f"{path}: config must be a mapping of keys to values at the top level{hint}")
    budget = [MAX_NODES]
    read = []
    try:
        for dotted, node, scalar in _walk(root, "", budget, path):
            key = canonical_key(dotted)
            written = dotted if key != dotted else ""
            value = ConfigValue(key, scalar, Source(path, node.start_mark.line + 1), origin, written)
            read.append((dotted, value))
    except RecursionError:
        raise UserError(_TOO_DEEP.format(path=path)) from None
    return _model_section_first(read)


_LISTED = 50  # the items looked at to tell a list of overrides


def _model_section_first(read: list[tuple[str, ConfigValue]]) -> list[ConfigValue]:
    """The values in file order, except Bridge's stand-ins for a model key (keys.BRIDGE_FALLBACKS): they go
    first, so that the model's own value, read later, wins (the store keeps the last of one origin), and a
    null model value is left out where a stand-in has one."""
    stand_ins = [value for dotted, value in read if dotted in BRIDGE_FALLBACKS]
    filled = {value.key for value in stand_ins if value.value is not None}
    rest = [
        value
        for dotted, value in read
        if dotted not in BRIDGE_FALLBACKS and not (value.value is None and value.key in filled)
    ]
    return stand_ins + rest


def _walk(node: yaml.Node, prefix: str, budget: list[int], path: str) -> Iterator[tuple[str, yaml.Node, Any]]:
    """Yield (dotted key, node, plain value) for every leaf; lists are leaves."""
    for key_node, value_node in _mapping_pairs(node, budget, path):
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value_node, yaml.MappingNode):
            yield from _walk(value_node, dotted, budget, path)
        else:
            yield dotted, value_node, _plain(value_node, budget, path)


def _mapping_pairs(node: yaml.Node, budget: list[int], path: str):
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        _spend(budget, path)
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                # YAML loaders silently keep the last one; a launch would use a value the author may not mean.
                raise UserError(
                    f"{path}:{line}: duplicate key {key_node.value!r} (first at line {seen[key_node.value]})"
                )
            seen[key_node.value] = line
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` merges the aliased mapping in
            merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for item in merged:
                if isinstance(item, yaml.MappingNode):
                    yield from _mapping_pairs(item, budget, path)
            continue
        yield key_node, value_node


def _plain(node: yaml.Node, budget: list[int], path: str) -> Any:
    _spend(budget, path)
    if isinstance(node, yaml.ScalarNode):
        if node.tag in _STANDARD_SCALAR_TAGS:
            try:
                return _constructor.construct_object(node)
            except (yaml.YAMLError, ValueError):
                return node.value
        # Custom tags: keep the text as written, never construct (`!!python/name:os.system` has no value).
        return node.value or "!!" + node.tag.removeprefix("tag:yaml.org,2002:")
    if isinstance(node, yaml.SequenceNode):
        return [_plain(item, budget, path) for item in node.value]
    return {
        (k.value if isinstance(k, yaml.ScalarNode) else "?"): _plain(v, budget, path)
        for k, v in _mapping_pairs(node, budget, path)
    }


def _spend(budget: list[int], path: str) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise UserError(f"{path}: config expands to more than {MAX_NODES} nodes (alias bomb?); refusing to read it")
