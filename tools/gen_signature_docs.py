#!/usr/bin/env python3
"""Write docs/signatures/<id>.md and docs/signatures/README.md from the catalogue.

python3 tools/gen_signature_docs.py          # (re)write the pages
python3 tools/gen_signature_docs.py --check  # exit 1 if any page is stale or missing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from offloaddoctor.api import load_catalog  # noqa: E402
from offloaddoctor.render.signature_docs import pages  # noqa: E402

OUT = ROOT / "docs" / "signatures"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale pages")
    args = parser.parse_args()
    wanted = pages(load_catalog())
    stale = [name for name, text in wanted.items() if not (OUT / name).exists() or (OUT / name).read_text() != text]
    extra = [p.name for p in OUT.glob("*.md") if p.name not in wanted] if OUT.exists() else []
    if args.check:
        for name in stale + extra:
            print(f"stale: docs/signatures/{name}")
        return 1 if stale or extra else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (OUT / name).write_text(wanted[name])
    for name in extra:
        (OUT / name).unlink()
    print(f"wrote {len(stale)} page(s), removed {len(extra)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
