"""Headless Chromium driven by Playwright, so a test sees the page as a browser does:
console messages, uncaught exceptions, failed loads, every request, the DOM after its
scripts ran, and a screenshot.

Playwright drives the SYSTEM browser (Debian's `chromium`) through its own node driver,
which ships inside the wheel: nothing is downloaded at run time (never `playwright
install`). The flags keep Chromium from calling out; any request the page itself makes
to anything but file: or data: is recorded and aborted.

`find_or_install()` installs Debian's `chromium` when it is missing and this is root with
apt-get (as on CI); otherwise the caller skips, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars")
# Chromium alone: the HTML statuses are words with CSS shapes, so no emoji font is needed.
APT_PACKAGES = ("chromium",)
LOCAL_SCHEMES = ("file:", "data:")


def find_or_install() -> tuple[str | None, str]:
    """(path of chromium, '') or (None, why there is none)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found, ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, ("chromium is not installed and this is not root with apt-get: "
                      "install Debian's `chromium` package to run the browser tests")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"],
                ["apt-get", "install", "-y", "--no-install-recommends", *APT_PACKAGES]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            return None, f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}"
    found = shutil.which("chromium")
    return (found, "") if found else (None, "apt-get installed chromium but it is not on PATH")


def load(binary: str, page: Path, screenshot: Path | None = None,
         probes: dict[str, str] | None = None) -> dict:
    """Opens `page` and reports what a person's browser would have met: console messages
    of level error or warning (Playwright also passes on Chromium's own log entries there:
    failed loads, CSP), uncaught exceptions, failed requests, requests to anything but
    file: and data: URIs, the number of case rows, whether the page's script finished,
    and whether header clicks sort the table; `probes`, JavaScript expressions by name,
    are evaluated on the page as loaded (their values under "probes")."""
    from playwright.sync_api import sync_playwright

    console: list[str] = []
    exceptions: list[str] = []
    failed: list[str] = []
    foreign: list[str] = []

    def outside(url: str) -> bool:
        return not url.startswith(LOCAL_SCHEMES)

    def on_request(request) -> None:
        if outside(request.url) and request.url not in foreign:
            foreign.append(request.url)

    def on_route(route) -> None:
        if outside(route.request.url):
            on_request(route.request)
            route.abort()
        else:
            route.continue_()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=list(FLAGS))
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", on_route)
            tab = context.new_page()
            tab.on("console", lambda m: console.append(m.text)
                   if m.type in ("error", "warning", "assert") else None)
            tab.on("pageerror", lambda e: exceptions.append(e.stack or f"{e.name}: {e.message}"))
            tab.on("request", on_request)
            tab.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}"))
            tab.goto(page.resolve().as_uri(), wait_until="load")
            ready = tab.evaluate("document.body.getAttribute('data-ready')")
            rows = tab.evaluate("document.querySelectorAll('#case-table tbody tr').length")
            ids = tab.evaluate("Array.from(document.querySelectorAll('#case-table tbody tr'))"
                               ".map(r => r.getAttribute('data-id'))")
            images = tab.evaluate("Array.from(document.images).map(i => [i.complete, "
                                  "i.naturalWidth])")
            probed = {name: tab.evaluate(js) for name, js in (probes or {}).items()}
            if screenshot is not None:  # as first shown: regressions first
                tab.screenshot(path=screenshot, full_page=True)
            # Click "Median ms" twice: ascending, then descending, blanks last both times.
            col = tab.evaluate("Array.from(document.querySelectorAll('#case-table th'))"
                               ".findIndex(th => th.textContent === 'Median ms')")
            ascending = descending = None
            if col >= 0:
                read = ("Array.from(document.querySelectorAll('#case-table tbody tr'))"
                        f".map(r => r.cells[{col}].getAttribute('data-v'))")
                header = tab.locator("#case-table th").nth(col)
                header.click()
                ascending = tab.evaluate(read)
                header.click()
                descending = tab.evaluate(read)
            tab.wait_for_timeout(200)  # late console messages
        finally:
            browser.close()
    return {"probes": probed, "ready": ready, "rows": rows, "ids": ids, "ascending": ascending,
            "descending": descending, "images": images, "console_errors": console,
            "exceptions": exceptions, "failed_requests": failed, "foreign_requests": foreign}


def binary_or_skip() -> str:
    """The browser tests' chromium, or the test skipped saying why there is none."""
    import pytest

    pytest.importorskip("playwright.sync_api",
                        reason="playwright is not installed: pip install -e '.[test]'")
    binary, why = find_or_install()
    if binary is None:
        pytest.skip(why)
    return binary
