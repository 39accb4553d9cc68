"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no extra package.

Loads a page with the network switched off, records every request the page makes, reads computed styles
and takes a screenshot. Used by the report tests to check that the HTML report renders styled, by itself.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_S = 60


def find_chromium() -> str | None:
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


@dataclass
class PageVisit:
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, the document included
    values: dict[str, Any] = field(default_factory=dict)  # expression -> its value in the loaded page
    screenshot: bytes = b""  # PNG


class Chromium:
    """One headless browser process; ``visit`` loads a page in a fresh tab."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="gpuplan-chromium-")
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--remote-debugging-pipe",
            f"--user-data-dir={self.profile.name}",
            # Belt and braces beside Network.emulateNetworkConditions: any request that gets past the
            # emulation goes to a closed port and a resolver that resolves nothing.
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "about:blank",
        ]
        # The protocol pipe is the browser's fd 3 (commands in) and fd 4 (replies out).
        script = f'exec "$0" "$@" 3<&{to_browser_read} 4>&{from_browser_write}'
        self.process = subprocess.Popen(
            ["bash", "-c", script, executable, *flags],
            pass_fds=(to_browser_read, from_browser_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.profile.cleanup()

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.from_browser], [], [], remaining)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise OSError("Chromium closed its DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        command: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self.to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, session: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._read_message(deadline))

    def visit(self, url: str, expressions: tuple[str, ...], width: int = 1000, height: int = 1400) -> PageVisit:
        """Load ``url`` offline, evaluate ``expressions`` after the load event, and take a screenshot."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.events.clear()
        self.send("Network.enable", {}, session)
        self.send(
            "Network.emulateNetworkConditions",
            {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1},
            session,
        )
        self.send("Page.enable", {}, session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        visit = PageVisit()
        for expression in expressions:
            answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
            visit.values[expression] = answer["result"].get("value")
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session)
        visit.screenshot = base64.b64decode(shot["data"])
        visit.requests = [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session
        ]
        self.send("Target.closeTarget", {"targetId": target})
        return visit


def file_url(path: Path) -> str:
    return path.resolve().as_uri()
