"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
fd 3 carries commands in, fd 4 events and replies out, each message JSON ending in NUL),
so a test sees the page as a browser does: console messages, uncaught exceptions,
every network request, the DOM after its scripts ran, and a screenshot. Standard
library only; no websocket client, no port.

`find_or_install()` installs Debian's `chromium` when it is missing and this is root with
apt-get (as on CI); otherwise the caller skips, saying why.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--remote-debugging-pipe")
# Chromium plus a colour emoji font, so that screenshots show the status symbols.
APT_PACKAGES = ("chromium", "fonts-noto-color-emoji")


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


class Browser:
    """One Chromium process with one page target attached (flattened session)."""

    def __init__(self, binary: str, width: int = 1400, height: int = 1000):
        self.profile = tempfile.mkdtemp(prefix="benchflow-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Park both child ends above fd 10 so the dup2 onto 3 and 4 cannot clobber them.
        child_in = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_child_r)
        os.close(from_child_w)

        def wire_pipes():  # runs in the child between fork and exec
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=wire_pipes, close_fds=False)
        os.close(child_in)
        os.close(child_out)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]

    def _send(self, message: dict) -> None:
        os.write(self._to_child, json.dumps(message).encode() + b"\0")

    def _receive(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no message from chromium")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the pipe: "
                                   + self.proc.stderr.read().decode(errors="replace")[-2000:])
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        """Sends one command and returns its result; events that arrive meanwhile are
        kept in self.events."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params) -> dict:
        return self.call(method, session=True, **params)

    def wait_for(self, event: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        for seen in self.events:
            if seen.get("method") == event:
                return seen
        while True:
            message = self._receive(deadline)
            self.events.append(message)
            if message.get("method") == event:
                return message

    def evaluate(self, expression: str):
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.page("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def load(binary: str, page: Path, screenshot: Path | None = None) -> dict:
    """Opens `page` and reports what a person's browser would have met: console messages
    of level error or warning, uncaught exceptions, log entries (failed loads, CSP),
    requests to anything but the page itself and data: URIs, the number of case rows,
    whether the page's script finished, and whether header clicks sort the table."""
    browser = Browser(binary)
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.page(f"{domain}.enable")
        url = page.resolve().as_uri()
        browser.page("Page.navigate", url=url)
        browser.wait_for("Page.loadEventFired")
        ready = browser.evaluate("document.body.getAttribute('data-ready')")
        rows = browser.evaluate("document.querySelectorAll('#case-table tbody tr').length")
        ids = browser.evaluate("Array.from(document.querySelectorAll('#case-table tbody tr'))"
                               ".map(r => r.getAttribute('data-id'))")
        images = browser.evaluate("Array.from(document.images).map(i => [i.complete, "
                                  "i.naturalWidth])")
        if screenshot is not None:  # as first shown: regressions first
            browser.screenshot(screenshot)
        # Click "Median ms" twice: ascending, then descending, blanks last both times.
        col = browser.evaluate("Array.from(document.querySelectorAll('#case-table th'))"
                               ".findIndex(th => th.textContent === 'Median ms')")
        ascending = descending = None
        if col >= 0:
            read = ("Array.from(document.querySelectorAll('#case-table tbody tr'))"
                    f".map(r => r.cells[{col}].getAttribute('data-v'))")
            click = f"document.querySelectorAll('#case-table th')[{col}].click()"
            browser.evaluate(click)
            ascending = browser.evaluate(read)
            browser.evaluate(click)
            descending = browser.evaluate(read)
        time.sleep(0.2)  # late console messages
        browser.call("Target.getTargets", timeout=10)  # drains pending events
    finally:
        browser.close()
    events = browser.events
    console = [e["params"] for e in events if e.get("method") == "Runtime.consoleAPICalled"
               and e["params"].get("type") in ("error", "warning", "assert")]
    exceptions = [e["params"]["exceptionDetails"] for e in events
                  if e.get("method") == "Runtime.exceptionThrown"]
    log = [e["params"]["entry"] for e in events if e.get("method") == "Log.entryAdded"
           and e["params"]["entry"].get("level") in ("error", "warning")]
    requests = [e["params"]["request"]["url"] for e in events
                if e.get("method") == "Network.requestWillBeSent"]
    foreign = [u for u in requests if u != url and not u.startswith("data:")]
    return {"ready": ready, "rows": rows, "ids": ids, "ascending": ascending,
            "descending": descending, "images": images, "console_errors": console,
            "exceptions": exceptions, "log_errors": log, "foreign_requests": foreign}
