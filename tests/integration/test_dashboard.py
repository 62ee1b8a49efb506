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
from client_helpers import FAST_FROM_FIRST
from server_procs import ServerProcess

from waiting import wait_until

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
            assert page.locator("#held").inner_text() == "6"
            page.fill("#send input[name=body]", "from the page")
            page.fill("#send input[name=keys]", "PAGE-KEY")
            page.click("#send button")
            page.wait_for_selector("#sent")
            assert page.locator("#held").inner_text() == "7"
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


async def test_groups_messages_and_dead_letters_through_the_pages(tmp_path: Path) -> None:
    """A consumer gives up on one message (dead-lettered at once: maxReconsumeTimes 0); the
    page's resend brings it back to that consumer; the message is found by key and shown;
    with the consumer gone, the page's offset reset moves the group back to the start."""
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (Debian package chromium; `make test` installs it)")
    from playwright.async_api import async_playwright

    from pocketmq.client import ConsumeContext, ConsumeResult, MessageExt, Producer, PushConsumer
    from pocketmq.client import message as new_message

    server = ServerProcess(
        "serve", tmp_path, "--namesrv-port", "0", "--broker-port", "0", listen=False
    )
    ns = f"127.0.0.1:{server.ready['namesrv']}"
    dashboard = ServerProcess("dashboard", tmp_path, "-n", ns, "--sample-interval", "0.5")
    url = f"http://127.0.0.1:{dashboard.ready['http']}"
    poison_ok = False
    got: list[bytes] = []

    async def listener(msgs: list[MessageExt], ctx: ConsumeContext) -> ConsumeResult:
        for m in msgs:
            if m.body == b"poison" and not poison_ok:
                return ConsumeResult.RECONSUME_LATER
            got.append(m.body)
        return ConsumeResult.CONSUME_SUCCESS

    errors: list[str] = []
    try:
        async with Producer("PG_DASH", ns) as producer:
            for body in (b"one", b"two", b"three"):
                await producer.send(new_message(TOPIC, body))
            await producer.send(new_message(TOPIC, b"poison", keys="POISON-KEY"))
        consumer = PushConsumer(
            "CG_DASH", ns, listener=listener, max_reconsume_times=0, **FAST_FROM_FIRST
        )
        consumer.subscribe(TOPIC)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            page = await browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            shots = tmp_path / "screenshots"
            shots.mkdir()
            async with consumer:
                await wait_until(
                    lambda: sorted(got) == [b"one", b"three", b"two"], 30, "3 consumed"
                )

                async def dead_letter_listed() -> bool:
                    await page.goto(url + "/dlq")
                    return "poison" in await page.content()

                await wait_until(dead_letter_listed, 30, "the dead letter on /dlq", interval_s=0.3)
                await page.screenshot(path=shots / "dlq.png", full_page=True)
                poison_ok = True
                await page.click("table.dlq button:has-text('Resend')")
                await page.wait_for_selector("#resent")
                await wait_until(lambda: b"poison" in got, 30, "the resent message consumed")

                await page.goto(url + "/groups")
                assert "CG_DASH" in await page.locator("#groups").inner_text()
                await page.click("text=CG_DASH")
                await page.wait_for_selector("#progress")
                connections = await page.locator("#connections").inner_text()
                assert consumer.instance.client_id in connections, connections
                await page.screenshot(path=shots / "group.png", full_page=True)

            await page.goto(url + "/messages")
            await page.fill("input[name=topic]", TOPIC)
            await page.fill("input[name=key]", "POISON-KEY")
            await page.click("#search button")
            await page.wait_for_selector("#results tbody tr")
            await page.click("#results tbody tr a")
            await page.wait_for_selector("#body")
            assert await page.locator("#body").inner_text() == "poison"
            assert "POISON-KEY" in await page.locator("#properties").inner_text()
            await page.screenshot(path=shots / "message.png", full_page=True)

            # The consumer is gone: the reset commits the offsets itself (as mqadmin does).
            await page.goto(url + "/groups/CG_DASH")
            await page.select_option("select[name=topic]", TOPIC)
            await page.click("#reset button")
            await page.wait_for_selector("#reset-done")
            assert await page.locator("#total-lag").inner_text() == "4"
            await browser.close()
        # What the page did is what the broker has.
        progress = admin(ns, "consumer-progress", "-g", "CG_DASH", "-t", TOPIC)
        assert "total lag: 4" in progress, progress
    finally:
        assert dashboard.stop() == 0
        assert server.stop() == 0
    assert not errors, errors
