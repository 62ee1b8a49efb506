"""`pocketmq dashboard` end to end: a live `pocketmq serve`, the dashboard as its own process,
and Debian's chromium driven headless by Playwright. Every page must load without a console
error and show the test's cluster and topic; screenshots go to the test's temp dir (test
output, not the repo). Skipped, with the reason, only where chromium is not installed
(`make test` installs it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_procs import ServerProcess

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
TOPIC = "DashboardOrders"


def admin(namesrv: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli", "admin", "-n", namesrv, *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(NameServer address, dashboard URL) with one topic holding three messages."""
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (Debian package chromium; `make test` installs it)")
    server = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    ns = f"127.0.0.1:{server.ready['namesrv']}"
    dashboard = None
    try:
        admin(ns, "update-topic", "-t", TOPIC, "-r", "2", "-w", "2")
        for i in range(3):
            admin(ns, "send-message", "-t", TOPIC, "-p", f"order {i}")
        dashboard = ServerProcess("dashboard", tmp_path, "-n", ns, "--sample-interval", "0.2")
        yield ns, f"http://127.0.0.1:{dashboard.ready['http']}"
    finally:
        if dashboard is not None:
            assert dashboard.stop() == 0
        assert server.stop() == 0


def test_pages_load_without_console_errors(cluster: tuple[str, str], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    ns, url = cluster
    shots = tmp_path / "screenshots"
    shots.mkdir()
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))

            page.goto(url + "/")
            brokers = page.locator("#brokers tbody tr").first.inner_text()
            assert "DefaultCluster" in brokers and "ASYNC_MASTER" in brokers
            # The sampler draws once it has two samples of the broker.
            page.wait_for_function(
                "() => { location.reload(); return document.querySelector('svg polyline'); }",
                polling=500, timeout=15_000,
            )  # fmt: skip
            # Sends while it samples show up as a write rate above the empty chart's scale (1).
            for i in range(3):
                admin(ns, "send-message", "-t", TOPIC, "-p", f"late order {i}")
            page.wait_for_function(
                "() => { location.reload();"
                " const top = document.querySelectorAll('svg.chart text')[1];"
                " return top && top.textContent !== '1'; }",
                polling=500, timeout=15_000,
            )  # fmt: skip
            page.screenshot(path=shots / "cluster.png", full_page=True)

            page.goto(url + "/topics")
            assert TOPIC in page.locator("#topics").inner_text()
            assert "RMQ_SYS_TRANS_HALF_TOPIC" not in page.content()
            page.screenshot(path=shots / "topics.png", full_page=True)

            page.click(f"text={TOPIC}")
            page.wait_for_url(f"**/topics/{TOPIC}")
            route = page.locator("#route tbody").inner_text()
            assert "2\t2\t6" in route, route
            page.screenshot(path=shots / "topic.png", full_page=True)

            # A topic the NameServer does not know: the page says what failed, with 502.
            response = page.goto(url + "/topics/NoSuchTopic")
            assert response is not None and response.status == 502
            assert "code 17" in page.locator("#error").inner_text()
        finally:
            browser.close()
    # The 502 above is the one expected console error (the failed document load).
    unexpected = [e for e in errors if "502" not in e]
    assert not unexpected, unexpected
    assert sorted(p.name for p in shots.iterdir()) == ["cluster.png", "topic.png", "topics.png"]
