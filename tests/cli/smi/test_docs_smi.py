"""The documentation of issue 32: every vendor has a page in the Vendors menu, the changelog is in
the nav, getting started installs from the checkout, and the conformance matrix page leads with
its summary (the requirement lines come before the table of every run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
VENDORS = ("nvidia", "amd", "ascend", "cambricon", "hygon", "mthreads", "iluvatar", "metax", "kunlunxin", "enflame")


def _nav_section(config: str, title: str) -> str:
    block = config.split(f"  - {title}:\n", 1)[1]
    return block.split("\n  - ", 1)[0]


def test_the_vendors_menu_lists_every_in_tree_vendor_plugin() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = re.findall(r":\s*(\S+\.md)", _nav_section(config, "Vendors"))
    assert len(pages) == len(VENDORS)
    for vendor in VENDORS:
        page = next(p for p in pages if Path(p).stem == vendor)
        text = (DOCS / page).read_text(encoding="utf-8")
        assert f"`{vendor}`" in text or vendor == "ascend", page  # the backend's name
    assert "  - Changelog: changelog.md\n" in config


def test_every_cli_vendor_page_names_its_shipped_scenarios() -> None:
    for vendor in VENDORS[3:]:
        shipped = sorted(p.name for p in (ROOT / "plugins" / vendor / "scenarios").iterdir() if p.is_dir())
        text = (DOCS / "vendors" / f"{vendor}.md").read_text(encoding="utf-8")
        assert all(f"`{name}`" in text for name in shipped), (vendor, shipped)
        assert f"accel bugreport --backend {vendor} -o scenario=" in text


def test_getting_started_installs_from_the_checkout() -> None:
    text = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert "pip install -e ." in text and "pip install accel-sdk" not in text
    assert "accel bugreport --backend ascend -o scenario=910b-8 --out" in text


def test_the_matrix_page_reads_summary_first() -> None:
    text = (DOCS / "conformance" / "matrix.md").read_text(encoding="utf-8")
    summary, requirements, backends = (text.index(h) for h in ("\n## Summary\n", "\n## Requirements\n",
                                                               "\n## Backends\n"))
    assert summary < requirements < backends
    runs = len(json.loads((DOCS / "conformance" / "matrix.json").read_text(encoding="utf-8"))["columns"])
    assert runs > 40
    # No table as wide as the runs: the widest row before the notes has a handful of columns.
    body = text[: text.index("\n## Notes\n")]
    widest = max(line.count(" | ") for line in body.splitlines() if line.startswith("| "))
    assert widest < 10, widest
