"""A minimal headless-Chromium driver over the DevTools protocol, with no Python dependency.

Chromium is started with ``--remote-debugging-pipe``: it reads DevTools commands from file
descriptor 3 and writes replies and events to descriptor 4, each message a JSON object ended
by a NUL byte. No port, no websocket library, no chromedriver.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Browser", "PageCheck", "find_chromium"]

_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    """Path of Debian's ``chromium`` (or ``chromium-browser``), or None."""
    for name in _NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageCheck:
    """What loading one page produced."""

    console_errors: list[str] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    screenshot: bytes = b""


class Browser:
    """One headless Chromium process driven over a DevTools pipe (a context manager)."""

    def __init__(self, executable: str, profile_dir: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._buf = b""
        self._id = 0
        self._events: list[dict[str, Any]] = []
        to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, from_chrome_w = os.pipe()
        args = [
            executable,
            "--headless",
            "--no-sandbox",  # needed as root (CI runs as root)
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile_dir}",
            "--window-size=1280,1600",
            "about:blank",
        ]
        self._log = open(profile_dir.parent / "chromium.log", "wb")
        # bash moves our pipe ends onto descriptors 3 and 4 before exec'ing chromium (dash
        # cannot redirect from descriptors above 9)
        self.proc = subprocess.Popen(
            [
                shutil.which("bash") or "/bin/bash",
                "-c",
                'r=$1; w=$2; shift 2; exec "$@" 3<&"$r" 4>&"$w"',
                "bash",
                str(to_chrome_r),
                str(from_chrome_w),
                *args,
            ],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask Chromium to quit; kill it (by its pid) when it does not within 10 s."""
        if self.proc.poll() is None:
            try:
                self._send("Browser.close")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for fd in (self._to_chrome_w, self._from_chrome_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()

    # ------------------------------------------------------------------ protocol
    def _send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome_w, json.dumps(msg).encode() + b"\0")
        return self._id

    def _recv(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no DevTools message from chromium within {self.timeout} s")
            ready, _, _ = select.select([self._from_chrome_r], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome_r, 1 << 20)
                if not chunk:
                    raise EOFError(f"chromium closed the DevTools pipe (exit {self.proc.poll()})")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(raw))

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send a command and return its result; events that arrive meanwhile are kept."""
        mid = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._recv(deadline)
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._events.append(msg)

    def wait_event(self, method: str, session: str) -> dict[str, Any]:
        """Wait for an event of this session (already received ones count)."""
        deadline = time.monotonic() + self.timeout
        k = 0
        while True:
            while k < len(self._events):
                ev = self._events[k]
                k += 1
                if ev.get("method") == method and ev.get("sessionId") == session:
                    return ev
            self._events.append(self._recv(deadline))

    # ------------------------------------------------------------------ page check
    def check_page(self, url: str) -> PageCheck:
        """Load ``url``; collect console errors, exceptions and failed loads; images; screenshot."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        start = len(self._events)
        self.call("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        # wait until every image is decoded (a broken one rejects: reported as not loaded)
        self.call(
            "Runtime.evaluate",
            {
                "expression": "Promise.allSettled([...document.images].map(i => i.decode()))",
                "awaitPromise": True,
            },
            session=session,
        )
        images = self.call(
            "Runtime.evaluate",
            {
                "expression": "[...document.images].map(i => ({src: i.src.slice(0, 40), "
                "complete: i.complete, naturalWidth: i.naturalWidth, "
                "naturalHeight: i.naturalHeight}))",
                "returnByValue": True,
            },
            session=session,
        )["result"]["value"]
        metrics = self.call("Page.getLayoutMetrics", session=session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = self.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": size["width"],
                    "height": min(size["height"], 16000),
                    "scale": 1,
                },
            },
            session=session,
        )
        errors = []
        for ev in self._events[start:]:
            if ev.get("sessionId") != session:
                continue
            method, params = ev.get("method"), ev.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                errors.append(f"exception: {details.get('text')} {details.get('exception', {})}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                args = [a.get("value", a.get("description")) for a in params.get("args", [])]
                errors.append(f"console.{params['type']}: {args}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(
                    f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}"
                )
        self.call("Target.closeTarget", {"targetId": target})
        return PageCheck(errors, list(images), base64.b64decode(shot["data"]))
