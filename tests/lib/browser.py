"""A page opened in Debian's headless Chromium, driven over the DevTools protocol.

Chromium is started with --remote-debugging-pipe: it reads commands from fd 3 and writes replies
and events to fd 4, each a JSON message ended by a NUL byte (the protocol's pipe transport, which
needs no websocket library). The page's console errors, uncaught exceptions, the browser's own
error log entries (a resource that failed to load) and every network request are recorded while it
loads and while a test works with it. Every wait is bounded; the browser is ended by its PID.

As a command: browser.py PAGE.html [--screenshot OUT.png] [--width 1280] prints what the page
logged and requested, and exits 1 if it logged an error or an image did not load."""
import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# The browser found on this machine (Debian: the chromium package, which scripts/setup installs).
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find():
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(Exception):
    pass


class Page:
    """One tab. Use as a context manager: the browser process ends when it leaves."""

    def __init__(self, width=1280, height=900, timeout=60):
        self.timeout = timeout
        self.width, self.height = width, height
        self.console_errors, self.exceptions, self.log_errors, self.requests = [], [], [], []
        self._next_id = 0
        self._buffer = b""
        self._events = []
        exe = find()
        if exe is None:
            raise BrowserError("no Chromium found (" + ", ".join(CANDIDATES) + "); scripts/setup installs Debian's chromium")
        self._profile = tempfile.mkdtemp(prefix="pairperf-browser-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():  # the pipe transport's fixed descriptors (copied first: either may be 3 or 4)
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [exe, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "about:blank"]
        self._proc = subprocess.Popen(args, preexec_fn=child_fds, pass_fds=(3, 4),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable", session=True)
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        except BaseException:
            self.close()
            raise

    # -- the protocol ------------------------------------------------------------------------------
    def _send(self, message):
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_chrome, data):]

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"the browser said nothing for {self.timeout} s")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise BrowserError(f"the browser ended (exit {self._proc.poll()}): {self._stderr_tail()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _note(self, event):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
        elif method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.exceptions.append((d.get("exception") or {}).get("description") or d.get("text", ""))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            e = params["entry"]
            self.log_errors.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        self._events.append(event)

    def call(self, method, params=None, session=False):
        """Sends one command and returns its result; events that arrive meanwhile are recorded."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._send(message)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self._note(reply)

    def wait_for(self, method, timeout=None):
        """Waits for an event of the page (bounded); returns its params."""
        deadline = time.monotonic() + (timeout or self.timeout)
        for i, e in enumerate(self._events):
            if e.get("method") == method:
                return self._events.pop(i).get("params", {})
        while True:
            event = self._read_message(deadline)
            self._note(event)
            if event.get("method") == method:
                self._events.remove(event)
                return event.get("params", {})

    # -- what a test does --------------------------------------------------------------------------
    def open(self, path):
        """Opens a file and waits for its load event."""
        url = "file://" + os.path.abspath(path)
        self._events.clear()
        reply = self.call("Page.navigate", {"url": url}, session=True)
        if reply.get("errorText"):
            raise BrowserError(f"{url}: {reply['errorText']}")
        self.wait_for("Page.loadEventFired")
        self.url = url
        return url

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (JSON-serializable)."""
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                          session=True)
        if "exceptionDetails" in reply:
            d = reply["exceptionDetails"]
            raise BrowserError(f"{expression[:80]}...: {(d.get('exception') or {}).get('description') or d.get('text')}")
        return reply["result"].get("value")

    def broken_images(self):
        """The alt text (or source) of every image that did not load."""
        return self.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                             ".map(i => i.alt || i.src.slice(0, 80))")

    def screenshot(self, path, max_height=8000):
        """The whole page (down to max_height CSS pixels) as a PNG."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        height = min(int(size["height"]) + 1, max_height)
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                    "clip": {"x": 0, "y": 0, "width": self.width, "height": height,
                                                             "scale": 1}}, session=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return self.width, height

    def problems(self):
        """Every console error, exception and error log entry seen so far."""
        return ([f"console error: {m}" for m in self.console_errors] + [f"exception: {m}" for m in self.exceptions]
                + [f"browser log error: {m}" for m in self.log_errors])

    def _stderr_tail(self):
        try:
            self._proc.wait(timeout=2)
            return self._proc.stderr.read()[-2000:].decode(errors="replace")
        except subprocess.TimeoutExpired:
            return "(still running)"

    def close(self):
        if self._proc.poll() is None:
            try:
                self._send({"id": self._next_id + 1, "method": "Browser.close"})
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self._proc.pid, signal.SIGKILL)  # its own session: the browser and its helpers
                self._proc.wait(timeout=10)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._proc.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("page")
    ap.add_argument("--screenshot")
    ap.add_argument("--width", type=int, default=1280)
    a = ap.parse_args(argv)
    with Page(width=a.width) as page:
        page.open(a.page)
        broken = page.broken_images()
        images = page.evaluate("document.images.length")
        if a.screenshot:
            print("screenshot %s: %d x %d" % ((a.screenshot,) + page.screenshot(a.screenshot)))
        for p in page.problems():
            print(p)
        print(f"{images} images, {len(broken)} did not load{': ' + ', '.join(broken) if broken else ''}")
        print(f"requests: {', '.join(u[:100] for u in page.requests)}")
        return 1 if broken or page.problems() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
