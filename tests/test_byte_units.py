"""One table of byte units: "MB" is a decimal megabyte in PyTorch's messages and in sizes a user types, and
a mebibyte on Megatron's lines. Every reader takes its reading from byte_units."""

from offloaddoctor import byte_units
from offloaddoctor.scanning.units import parse_quantity
from offloaddoctor.memory.gpus import parse_size
from offloaddoctor.metrics.numbers import BRIDGE_REPORT_UNIT_BYTES, MEGATRON_UNIT_BYTES, to_mib

from tests.conftest import parsed_source


def test_the_readers_share_the_table():
    assert MEGATRON_UNIT_BYTES is byte_units.MEGATRON
    assert BRIDGE_REPORT_UNIT_BYTES is byte_units.BRIDGE_REPORT


def test_mb_is_read_as_each_source_means_it():
    assert parse_quantity("80 MB") == 80 * 10**6  # a PyTorch-style quantity: the unit as printed
    assert parse_size("80MB", "--gpu-memory") == 80 * 10**6  # typed by a user
    assert to_mib(80, "MB") == 80  # Megatron's "MB" is bytes / 1024**2
    assert to_mib(1, "GB", BRIDGE_REPORT_UNIT_BYTES) == 10**9 / 2**20  # Bridge's report divides by 1e9
    for unit in ("KiB", "MiB", "GiB"):  # binary units mean the same everywhere
        assert byte_units.STANDARD[unit.lower()] == byte_units.MEGATRON[unit.lower()]


def test_a_mebibyte_is_defined_once():
    """MiB was defined four times (byte_units, metrics/compare, memory/calibration, memory/gpus): no module but
    byte_units may bind a name for 2**20 (buffer sizes like `BLOCK_BYTES = 1 << 20` are not units)."""
    import ast
    from pathlib import Path

    package = Path(byte_units.__file__).parent
    found = []
    for path in package.rglob("*.py"):
        for node in ast.walk(parsed_source(path)):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    name = getattr(target, "id", "")
                    if name.lower() in {"mib", "mb", "mebibyte"} or name.lower().endswith("_mib_bytes"):
                        found.append(f"{path.relative_to(package)}:{name}")
    assert found == ["byte_units.py:MIB"]
