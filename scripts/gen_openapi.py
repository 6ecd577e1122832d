"""Write the OpenAPI document of ``accel serve`` to ``docs/service-openapi.json``.

    python scripts/gen_openapi.py           # write it
    python scripts/gen_openapi.py --check   # exit 1 when the committed file is not current

The file is committed so API changes show in review; a test regenerates it and compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "service-openapi.json"


def render() -> str:
    import accel
    from accel.service._openapi import openapi

    return json.dumps(openapi(accel.__version__), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed file is not current")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.is_file() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is not current: run python scripts/gen_openapi.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
