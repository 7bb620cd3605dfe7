from __future__ import annotations

from pathlib import Path

import pytest

from offloaddoctor.catalog.loader import load_catalog

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()
