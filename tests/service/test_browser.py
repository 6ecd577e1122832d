"""A real browser (Debian's Chromium driven by Playwright) on the job pages of accel serve.

It logs in with a token, opens the page of a finished and of a failed job, and checks that the
timeline, the allocation, the exit reason, a device chart and the bill are visible.  Screenshots
go to the test's temporary directory (or ``$ACCEL_SCREENSHOTS``), never into git.  Skipped, with
the reason, only when no Chromium or no Playwright is installed (``.ci/run`` installs both).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.service._svc import rig

pytest.importorskip("starlette")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's Python package is not installed")

CHROMIUM = next((p for p in ("/usr/lib/chromium/chromium", "/usr/bin/chromium", shutil.which("chromium") or "")
                 if p and os.access(p, os.X_OK)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium)")
def test_a_browser_sees_the_record_of_a_finished_and_a_failed_job(tmp_path: Path) -> None:
    shots = Path(os.environ.get("ACCEL_SCREENSHOTS") or tmp_path)
    with rig(tmp_path) as r:
        ok = r.submit(r.alice, name="eval", devices=2, model="H100", duration_s=600)
        bad = r.submit(r.alice, name="broken", devices=1, model="4090", duration_s=300,
                       env={"ACCEL_SIM_EXIT_CODE": "137"})
        r.run_for(14)
        assert r.show(r.alice, ok["id"])["state"] == "finished"
        assert r.show(r.alice, bad["id"])["state"] == "failed"
        base = str(r.client.base_url).rstrip("/")
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page()
                page.goto(f"{base}/jobs/{ok['id']}")
                assert page.url.endswith("/login")  # no session yet
                page.fill("input[name=token]", r.alice)
                page.click("button[type=submit]")
                page.wait_for_url(f"{base}/jobs")
                assert page.locator("#jobs").is_visible()
                assert page.locator(f"a[href='/jobs/{ok['id']}']").is_visible()
                for job, state, reason in ((ok, "finished", "completed"), (bad, "failed", "failed")):
                    page.goto(f"{base}/jobs/{job['id']}")
                    assert page.locator("#state").inner_text() == state
                    timeline = page.locator("#timeline")
                    assert timeline.is_visible()
                    for kind in ("submitted", "placed", "started", state):
                        assert timeline.get_by_text(kind, exact=True).first.is_visible(), kind
                    alloc = page.locator("#allocation")
                    assert alloc.is_visible() and "CUDA_VISIBLE_DEVICES=GPU-" in alloc.inner_text()
                    assert page.locator(".exit-reason").inner_text() == reason
                    chart = page.locator("#charts svg").first
                    assert chart.is_visible()
                    points = page.locator("#charts svg polyline").first.get_attribute("points") or ""
                    assert len(points.split()) >= 2  # a line over the run, not a dot
                    assert page.locator("#bill").is_visible()
                    assert "USD" in page.locator("#bill-total").inner_text()
                    page.screenshot(path=str(shots / f"job-{state}.png"), full_page=True)
                assert "137" in page.locator("#exit").inner_text()
                page.goto(f"{base}/pools")
                assert page.locator("#pools").get_by_text("NVIDIA H100 80GB HBM3").is_visible()
            finally:
                browser.close()
