"""The documentation site: generated reference pages are current, every page is in the nav."""

from __future__ import annotations

from pathlib import Path

from tests._helpers import loaded_script

ROOT = Path(__file__).resolve().parents[2]


def test_generated_reference_pages_are_current() -> None:
    with loaded_script(ROOT / "scripts" / "gen_docs.py", "accel_gen_docs") as gen:
        for page, generate in gen.PAGES.items():
            assert page.read_text(encoding="utf-8") == generate(), (
                f"{page.relative_to(ROOT)} is not current: run python scripts/gen_docs.py"
            )


def test_the_cli_reference_covers_every_command_and_sub_command() -> None:
    text = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for heading in ("## accel ls", "## accel sched", "### accel sched bill", "## accel conformance",
                    "### accel conformance run", "### accel k8s extender", "### accel slurm healthcheck"):
        assert f"\n{heading}\n" in text, heading


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    docs = ROOT / "docs"
    pages = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md"))
    assert "design.md" in pages and "reference/model.md" in pages
    missing = [p for p in pages if f": {p}\n" not in config]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"


def test_relative_links_stay_inside_the_site() -> None:
    # mkdocs --strict (CI) refuses a link to a file outside docs/ (a repository path such as
    # ../benchmarks/...); this finds one in the test stage, naming page and line.
    import re

    docs = ROOT / "docs"
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    bad = []
    for page in sorted(docs.rglob("*.md")):
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target in link.findall(line):
                if "://" in target or target.startswith("mailto:"):
                    continue
                resolved = (page.parent / target).resolve()
                if docs.resolve() not in resolved.parents or not resolved.exists():
                    bad.append(f"{page.relative_to(ROOT)}:{number}: {target}")
    assert not bad, "links outside docs/ or to missing files (write a repository path as `code`):\n" + "\n".join(bad)
