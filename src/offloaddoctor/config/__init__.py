"""Loading run configuration from every place it lives, with provenance."""

from __future__ import annotations

from offloaddoctor.lazy_exports import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; at run time each name loads its module on first use
    from offloaddoctor.config.defaults import add_defaults
    from offloaddoctor.config.keys import canonical_key, is_known
    from offloaddoctor.config.loading import build_store, explicit_config, load_log_config
    from offloaddoctor.config.mixups import refuse_configs_as_logs
    from offloaddoctor.config.overrides import unknown_key_notes
    from offloaddoctor.config.values import ConfigValue, Source

# What `api` uses, and the module that defines each: imported on first use, for start-up time.
_HOMES = {
    "add_defaults": "defaults",
    "canonical_key": "keys",
    "is_known": "keys",
    "build_store": "loading",
    "explicit_config": "loading",
    "load_log_config": "loading",
    "refuse_configs_as_logs": "mixups",
    "unknown_key_notes": "overrides",
    "ConfigValue": "values",
    "Source": "values",
}

__all__ = [
    "ConfigValue",
    "Source",
    "add_defaults",
    "build_store",
    "canonical_key",
    "explicit_config",
    "is_known",
    "load_log_config",
    "refuse_configs_as_logs",
    "unknown_key_notes",
]


__getattr__ = lazy_exports(__name__, _HOMES, globals())
