"""Headless Chromium (Debian's chromium-headless-shell) driven over the
DevTools protocol on a pipe (--remote-debugging-pipe: no port to open, no
package beyond the standard library), for the tests that load trainbpf's
outputs in a browser: the HTML report (test_html.py) and the trace in
speedscope (test_speedscope.py)."""
import fcntl
import json
import os
import select
import shutil
import subprocess
import time

CHROMIUM = shutil.which("chromium-headless-shell")


class Browser:
    """Chromium over --remote-debugging-pipe: JSON messages ending in NUL, on fds 3 and 4."""

    def __init__(self):
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()
        # Above 4, so that moving them onto 3 and 4 overwrites neither.
        for fd in (cmd_r, res_w):
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            cmd_r, res_w = (high, res_w) if fd == cmd_r else (cmd_r, high)

        # The pipe's ends as fds 3 and 4 of chromium itself, by bash's
        # redirections: Popen closes what it was not told to keep after a
        # preexec_fn would have dup2'ed them.
        args = [CHROMIUM, "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1200,900",
                "about:blank"]
        self.proc = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{res_w} {cmd_r}<&- {res_w}>&-', "sh"] + args,
            pass_fds=(cmd_r, res_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(res_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def _read(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.res_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait(self, method, where=lambda params: True, timeout_s=60):
        """Reads messages until an event method whose params satisfy where
        has come; TimeoutError after timeout_s (a 2-core machine under a
        test suite's load)."""
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method and where(e["params"]) for e in self.events):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.res_r], [], [], left)[0]:
                raise TimeoutError(f"no {method} within {timeout_s} s")
            self.events.append(self._read())

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        self.proc.wait(timeout=30)
        os.close(self.cmd_w)
        os.close(self.res_r)

    def page(self):
        """A session attached to the browser's page, its events enabled."""
        target = next(t for t in self.call("Target.getTargets")["targetInfos"]
                      if t["type"] == "page")
        s = self.call("Target.attachToTarget", targetId=target["targetId"],
                      flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=s)
        self.events.clear()
        return s

    def evaluate(self, session, expression):
        return self.call("Runtime.evaluate", session=session, expression=expression,
                         returnByValue=True, awaitPromise=True)["result"].get("value")


def console_problems(events, levels):
    """Uncaught exceptions, the page's console calls at levels (console API
    types: "error", "warning", "assert") and the browser's log errors, among
    events. Not the browser's own log warnings: software WebGL logs "GPU
    stall due to ReadPixels" as a page reads a canvas back."""
    return [e for e in events if e.get("method") == "Runtime.exceptionThrown"
            or (e.get("method") == "Runtime.consoleAPICalled"
                and e["params"]["type"] in levels)
            or (e.get("method") == "Log.entryAdded"
                and e["params"]["entry"]["level"] == "error")]
