#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""LineGrabber in real browsers, against the host, manifests, extension and Lines as the examples
package (wormholectl-examples) installs them.

usage: browser.py [--no-firefox] ROOT

ROOT is an installed tree: the package extracted (`dpkg-deb -x`), or a tree laid out the same way
(Examples/LineGrabber/try-in-browsers.sh stages one from a Swift build). Tests/browser.sh is the
entry point; it checks what is needed and extracts the package.

Each browser runs headless (Debian's `chromium`, `firefox-esr`) in a mount namespace of its own
where ROOT's /usr is overlaid on the machine's (the machine's /usr is never written), so the
manifests' absolute host path is the installed one; a throwaway profile links the packaged
manifest in, as docs/install.md tells users to; the bus is a private dbus-daemon started from
dbus/, and the packaged Lines is the receiving app. With the standard library only:

- Chromium, over the DevTools protocol on --remote-debugging-pipe (file descriptors 3 and 4,
  NUL-separated JSON): loads the unpacked extension (Extensions.loadUnpacked), attaches to its
  service worker and calls sendLine(TEXT, URL), the function the "Send to Lines" menu item's click
  calls (a headless browser has no menu to click). Through native messaging the host appends the
  line to Lines' journal and wakes it: Lines must print it. A line typed into Lines must come back
  in the host's next reply; a line that is not a string must get the host's error naming it and
  store nothing; and in a second browser where the host's executable is missing the extension
  must answer with the browser's error.
- Firefox ESR, over Marionette: the extension goes in unsigned as a temporary add-on; its
  send.html page sends a line through native messaging, and Lines must print it.

Every wait is on an event (a protocol message or a line of output), each with a bound; none sleeps.
"""

import ctypes
import fcntl
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

HOST_NAME = "com.example.linegrabber"
EXTENSION_ID = "dgioladdfdbmmghkoldmnbeeipoamoal"
GROUP = "group.com.example.lines"
BOUND = 60.0  # seconds: the give-up bound of every wait (each is woken by its event long before)
REPO = Path(__file__).resolve().parent.parent
# Where the examples package (wormholectl-examples) installs them.
HOST = Path("/usr/libexec/wormholectl-examples/line-grabber-host")
LINES = Path("/usr/libexec/wormholectl-examples/lines")
MANIFEST = Path(f"/usr/share/wormholectl-examples/linegrabber/chromium/{HOST_NAME}.json")
EXTENSION = Path("/usr/share/wormholectl-examples/linegrabber/extension")
FIREFOX_MANIFEST = Path(f"/usr/share/wormholectl-examples/linegrabber/firefox/{HOST_NAME}.json")
FIREFOX_ID = "linegrabber@example.com"
FIREFOX_UUID = "5b0f3c2e-7a41-4d8e-9c16-2f4e8a9d1b37"  # the extension's moz-extension:// host, fixed by a pref


class Failure(Exception):
    pass


def say(text):
    print(f"browser: {text}", flush=True)


CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_REC, MS_PRIVATE = 1, 0x4000, 0x40000


def in_namespace(usr, command):
    """`command` run in a mount namespace of its own where `usr` is overlaid (read-only) on the
    machine's /usr: this script again, as `--enter USR COMMAND...` (enter_namespace, then exec)."""
    return [sys.executable, __file__, "--enter", str(usr), *command]


def enter_namespace(usr):
    """Enters a mount namespace where `usr` overlays /usr; nothing is written to the machine's /usr.

    As root, a mount namespace; otherwise first a user namespace that maps the runner's own uid and
    gid, so that the browser, the host and their bus connections keep the runner's credentials
    (dbus-daemon checks them). util-linux's unshare and mount refuse that mapping's mount, so this
    calls unshare(2) and mount(2) itself.
    """
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    if uid == 0:
        check(libc.unshare(CLONE_NEWNS), "unshare")
    else:
        check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as file:
                file.write(text)
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    options = f"lowerdir={usr}:/usr".encode()
    check(libc.mount(b"overlay", b"/usr", b"overlay", MS_RDONLY, options), f"overlaying {usr} on /usr")


def quit_browser(process, ask):
    """Asks the browser to quit (`ask`: its protocol's command) and waits for it; kills it (and its
    children) if it is still there after the bound."""
    try:
        ask()
    except (Failure, OSError):
        pass  # it may close the connection before it answers
    try:
        process.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()


class DevTools:
    """One DevTools connection over Chromium's --remote-debugging-pipe."""

    def __init__(self, process, to_browser, from_browser, log):
        self.process = process
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.log = log
        self.buffer = b""
        self.events = []
        self.next_id = 1

    def _read_one(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"Chromium sent nothing for {BOUND:.0f} s; its log:\n{self.log()}")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 65536)
                if not chunk:
                    raise Failure(
                        f"Chromium closed its DevTools pipe (exit {self.process.poll()}); its log:\n{self.log()}"
                    )
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=None):
        message_id = self.next_id
        self.next_id += 1
        message = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + BOUND
        while True:
            reply = self._read_one(deadline)
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise Failure(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, matches, what):
        deadline = time.monotonic() + BOUND
        while True:
            while self.events:
                event = self.events.pop(0)
                if matches(event):
                    return event
            self.events.append(self._read_one(deadline))
            if time.monotonic() > deadline:
                raise Failure(f"no {what} within {BOUND:.0f} s")


class Browser:
    """Headless Chromium in a mount namespace where ROOT's /usr and /etc overlay the machine's."""

    def __init__(self, usr, work, name, environment):
        self.profile = Path(work) / f"profile-{name}"
        self.log_path = Path(work) / f"chromium-{name}.log"
        # What docs/install.md tells a user to do: link the packaged manifest into the profile's
        # NativeMessagingHosts (the link resolves inside the namespace, where the package is).
        (self.profile / "NativeMessagingHosts").mkdir(parents=True)
        (self.profile / "NativeMessagingHosts" / MANIFEST.name).symlink_to(MANIFEST)
        to_read, to_browser = os.pipe()
        from_browser, to_write = os.pipe()
        # Chromium's ends, moved above 3 and 4 so that the shell's redirections cannot clash with them.
        for low in (to_read, to_write):
            high = fcntl.fcntl(low, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(low)
            to_read, to_write = (high, to_write) if low == to_read else (to_read, high)
        command = [
            "chromium",
            "--headless=new",
            "--remote-debugging-pipe",
            "--enable-unsafe-extension-debugging",
            f"--user-data-dir={self.profile}",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ]
        if os.getuid() == 0:
            command.append("--no-sandbox")  # as root Chromium refuses to start with its sandbox
        command.append("about:blank")
        # The fds Chromium speaks on are 3 (it reads) and 4 (it writes).
        redirections = f'exec "$@" 3<&{to_read} 4>&{to_write} {to_read}<&- {to_write}>&-'
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.process = subprocess.Popen(
            in_namespace(usr, ["bash", "-c", redirections, "chromium", *command]),
            pass_fds=(to_read, to_write),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
        os.close(log)
        os.close(to_read)
        os.close(to_write)
        self.devtools = DevTools(self.process, to_browser, from_browser, self.log)

    def log(self):
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(line for line in lines if "dbus" not in line.lower())[-4000:]

    def extension_worker(self):
        """Loads the unpacked extension and returns a DevTools session on its service worker."""
        devtools = self.devtools
        devtools.call("Target.setDiscoverTargets", {"discover": True})
        loaded = devtools.call("Extensions.loadUnpacked", {"path": str(EXTENSION)})
        if loaded.get("id") != EXTENSION_ID:
            raise Failure(f"the extension loaded as {loaded.get('id')!r}, not {EXTENSION_ID} (its manifest's key)")
        prefix = f"chrome-extension://{EXTENSION_ID}/"

        def is_worker(event):
            info = event.get("params", {}).get("targetInfo", {})
            return (
                event.get("method") in ("Target.targetCreated", "Target.targetInfoChanged")
                and info.get("type") == "service_worker"
                and info.get("url", "").startswith(prefix)
            )

        event = devtools.wait_event(is_worker, "service worker of the extension")
        attached = devtools.call(
            "Target.attachToTarget", {"targetId": event["params"]["targetInfo"]["targetId"], "flatten": True}
        )
        return attached["sessionId"]

    def evaluate(self, session, expression):
        """The value of `expression` in the extension's service worker, once the worker is activated.

        The worker's target (and so its session) exists before its script has run; its own
        `statechange` event says when it has (a worker is activated after its script ran).
        """
        once_activated = (
            "(async () => { const me = self.serviceWorker; if (me.state !== 'activated') "
            "await new Promise((done) => me.addEventListener('statechange', "
            "() => { if (me.state === 'activated') done(); })); "
            f"return {expression}; }})()"
        )
        result = self.devtools.call(
            "Runtime.evaluate", {"expression": once_activated, "awaitPromise": True, "returnByValue": True}, session
        )
        if "exceptionDetails" in result:
            raise Failure(f"{expression} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self):
        if self.process.poll() is None:
            quit_browser(self.process, lambda: self.devtools.call("Browser.close"))
        os.close(self.devtools.to_browser)
        os.close(self.devtools.from_browser)


class Firefox:
    """Headless Firefox ESR driven through Marionette (its remote protocol: "LENGTH:JSON" on TCP).

    The extension goes in as a temporary add-on (Addon:Install), which Firefox accepts unsigned;
    the packaged Firefox manifest is linked into ~/.mozilla/native-messaging-hosts, as docs tell
    users to.
    """

    def __init__(self, usr, work, environment):
        profile = work / "firefox-profile"
        profile.mkdir()
        uuids = json.dumps({FIREFOX_ID: FIREFOX_UUID})
        prefs = {
            "marionette.port": 0,
            "extensions.webextensions.uuids": uuids,
            "app.update.disabledForTesting": True,
            "browser.shell.checkDefaultBrowser": False,
            "datareporting.policy.dataSubmissionEnabled": False,
            "toolkit.telemetry.reportingpolicy.firstRun": False,
        }
        (profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in prefs.items())
        )
        home = work / "firefox-home"
        (home / ".mozilla/native-messaging-hosts").mkdir(parents=True)
        (home / ".mozilla/native-messaging-hosts" / FIREFOX_MANIFEST.name).symlink_to(FIREFOX_MANIFEST)
        # -remote-allow-system-access: Marionette's chrome context, to open the extension's page in a tab.
        command = [
            "firefox-esr",
            "--headless",
            "--marionette",
            "-remote-allow-system-access",
            "--no-remote",
            "--profile",
            str(profile),
            "about:blank",
        ]
        self.process = subprocess.Popen(
            in_namespace(usr, command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(environment, HOME=str(home)),
            start_new_session=True,
        )
        self.output = []
        self.port = None
        listening = threading.Event()

        def read_output():  # Firefox's output, kept for the failure message; it names Marionette's port
            for raw in self.process.stdout:
                line = raw.decode(errors="replace").rstrip()
                self.output.append(line)
                if "Marionette" in line and "Listening on port " in line:
                    self.port = int(line.rsplit(" ", 1)[1])
                    listening.set()
            listening.set()

        threading.Thread(target=read_output, daemon=True).start()
        if not listening.wait(BOUND) or self.port is None:
            raise Failure(f"Firefox did not start Marionette within {BOUND:.0f} s:\n{self.log()}")
        self.socket = socket.create_connection(("127.0.0.1", self.port), timeout=BOUND)
        self.stream = self.socket.makefile("rb")
        self.next_id = 1
        self._receive()  # the server's hello

    def log(self):
        return "\n".join(self.output[-40:])

    def _receive(self):
        length = b""
        while not length.endswith(b":"):
            byte = self.stream.read(1)
            if not byte:
                raise Failure(f"Firefox closed Marionette's connection:\n{self.log()}")
            length += byte
        return json.loads(self.stream.read(int(length[:-1])))

    def call(self, command, params=None):
        message_id = self.next_id
        self.next_id += 1
        data = json.dumps([0, message_id, command, params or {}]).encode()
        self.socket.sendall(str(len(data)).encode() + b":" + data)
        while True:
            _, reply_id, error, result = self._receive()
            if reply_id == message_id:
                if error:
                    raise Failure(f"Marionette's {command} failed: {error.get('error')}: {error.get('message')}")
                return result

    def send_page(self, text, url):
        """Opens the extension's send.html?text=…, which sends through native messaging; its reply."""
        self.call("WebDriver:NewSession", {"capabilities": {"alwaysMatch": {"timeouts": {"script": BOUND * 1000}}}})
        installed = self.call("Addon:Install", {"path": str(EXTENSION), "temporary": True})
        if installed.get("value") != FIREFOX_ID:
            raise Failure(f"Firefox installed the extension as {installed!r}, not {FIREFOX_ID}")
        page = f"moz-extension://{FIREFOX_UUID}/send.html?" + urllib.parse.urlencode({"text": text, "url": url})
        # Marionette may not navigate a content tab to an extension's page; the browser's own code may.
        self.call("Marionette:SetContext", {"value": "chrome"})
        self.call(
            "WebDriver:ExecuteScript",
            {
                "script": (
                    "gBrowser.selectedTab = gBrowser.addTab(arguments[0], "
                    "{triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal()});"
                ),
                "args": [page],
            },
        )
        self.call("Marionette:SetContext", {"value": "content"})
        handles = self.call("WebDriver:GetWindowHandles")
        self.call("WebDriver:SwitchToWindow", {"handle": handles[-1]})
        # The page sets its title once the host replied: wait for that change (a MutationObserver).
        shown = self.call(
            "WebDriver:ExecuteAsyncScript",
            {
                "script": (
                    "const done = arguments[arguments.length - 1];"
                    "const check = () => { if (document.title === 'LineGrabber: sending') return false;"
                    " done([document.title, document.getElementById('reply').textContent]); return true; };"
                    "if (!check()) new MutationObserver(check).observe(document.querySelector('title'), {childList: true});"
                ),
                "args": [],
            },
        )
        return shown["value"]

    def close(self):
        quit_browser(self.process, lambda: self.call("Marionette:Quit"))
        self.socket.close()


class Lines:
    """The packaged Lines app on the private bus: "ready" on standard error, then a line per line."""

    def __init__(self, program, bus, environment):
        self.process = subprocess.Popen(
            [program, "--bus-address", bus],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
        )
        self.buffers = {}
        line = self._line(self.process.stderr, "ready")
        if line != "ready":
            raise Failure(f"{program} did not start: {line!r}")

    def _line(self, stream, what):
        fd = stream.fileno()
        buffer = self.buffers.get(fd, b"")
        deadline = time.monotonic() + BOUND
        while b"\n" not in buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise Failure(f"no {what} from Lines within {BOUND:.0f} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise Failure(f"Lines exited (status {self.process.wait()}) before {what}")
            buffer += chunk
        line, self.buffers[fd] = buffer.split(b"\n", 1)
        return line.decode(errors="replace")

    def next_line(self, what):
        line = self._line(self.process.stdout, what)
        say(f"Lines printed: {line}")
        return line

    def answer(self, text):
        self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()

    def close(self):
        self.process.stdin.close()  # Lines exits when its input ends
        try:
            self.process.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def main():
    arguments = sys.argv[1:]
    firefox = "--no-firefox" not in arguments
    arguments = [argument for argument in arguments if argument != "--no-firefox"]
    if len(arguments) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 64
    root = Path(arguments[0]).resolve()
    for path in (HOST, LINES, MANIFEST, EXTENSION / "manifest.json") + ((FIREFOX_MANIFEST,) if firefox else ()):
        if not (root / path.relative_to("/")).is_file():
            raise Failure(f"{root} has no {path}: not a tree of the examples package")
    manifest = json.loads((root / MANIFEST.relative_to("/")).read_text())
    if manifest.get("name") != HOST_NAME or manifest.get("path") != str(HOST):
        raise Failure(
            f"the manifest {MANIFEST} names {manifest.get('name')!r} at {manifest.get('path')!r}, "
            f"not {HOST_NAME} at {HOST}"
        )
    if manifest.get("allowed_origins") != [f"chrome-extension://{EXTENSION_ID}/"]:
        raise Failure(f"the manifest allows {manifest.get('allowed_origins')}, not the extension {EXTENSION_ID}")
    version = subprocess.run(["chromium", "--version"], check=True, capture_output=True, text=True).stdout.strip()
    say(f"{root}: host {HOST}, manifest {MANIFEST}, extension {EXTENSION}; {version}")

    work = Path(tempfile.mkdtemp(prefix="wormhole-browser."))
    daemon = None
    try:
        started = subprocess.run(
            [
                "dbus-daemon",
                f"--config-file={REPO}/dbus/wormhole-session.conf",
                "--fork",
                "--print-address=1",
                "--print-pid=1",
                f"--address=unix:path={work}/bus",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        bus, pid = started.stdout.split()
        daemon = int(pid)
        environment = dict(
            os.environ,
            WORMHOLE_CONTAINER_ROOT=str(work / "containers"),
            XDG_RUNTIME_DIR=str(work),
            LINES_GROUP=GROUP,
            LINES_BUS_ADDRESS=bus,
            DBUS_SESSION_BUS_ADDRESS=bus,
            HOME=str(work),
        )
        environment.pop("LINES_CHANNEL", None)
        lines = Lines(root / LINES.relative_to("/"), bus, environment)
        try:
            check_line(root, work, environment, lines)
            if firefox:
                check_firefox(root, work, environment, lines)
        finally:
            lines.close()
        check_missing_host(root, work, environment)
    finally:
        if daemon:
            os.kill(daemon, 15)
        shutil.rmtree(work, ignore_errors=True)
    say("OK")
    return 0


def check_line(root, work, environment, lines):
    """A line through the extension, native messaging and the host reaches Lines; its answer comes back."""
    browser = Browser(root / "usr", work, "host", environment)
    try:
        session = browser.extension_worker()
        text = f"Hello from Chromium, {time.time_ns()}"
        url = "https://example.com/article"
        reply = browser.evaluate(session, f"sendLine({json.dumps(text)}, {json.dumps(url)})")
        say(f"the host replied to the extension: {json.dumps(reply)}")
        if not isinstance(reply, dict) or reply.get("ok") is not True or not reply.get("id"):
            raise Failure(f"the host's reply is not {{ok: true, id: …}}: {reply!r}")
        shown = lines.next_line("the line")
        if shown.partition(" (")[0] != f"lines: {json.dumps(text)} from {url}":
            raise Failure(f"Lines showed {shown!r}, not the line sent ({text!r} from {url})")

        # Lines answers; the host hands the answer to the extension with its next reply.
        answer = f"Thanks from Lines, {time.time_ns()}"
        lines.answer(answer)
        if lines.next_line("the answer") != f"lines: answered {json.dumps(answer)}":
            raise Failure("Lines did not store its answer")

        # A bad message through the same path: the host's error names the value, nothing is stored.
        bad = browser.evaluate(session, "sendLine(42, 'https://example.com/')")
        say(f"a line that is not a string: {json.dumps(bad)}")
        if bad != {"ok": False, "error": '"line" must be a string, not 42'}:
            raise Failure(f"the host's answer to a line that is not a string is not the error naming it: {bad!r}")
        second = f"Second line, {time.time_ns()}"
        reply = browser.evaluate(session, f"sendLine({json.dumps(second)}, {json.dumps(url)})")
        say(f"the host replied to the extension: {json.dumps(reply)}")
        if not isinstance(reply, dict) or (reply.get("toExtension") or {}).get("text") != answer:
            raise Failure(f"the host's reply does not carry Lines' answer {answer!r}: {reply!r}")
        shown = lines.next_line("the second line")
        if not shown.startswith(f"lines: {json.dumps(second)}"):
            raise Failure(f"after the bad message Lines showed {shown!r}, not {second!r}")
        say("the bad message stored nothing; Lines' answer reached the extension")
    finally:
        browser.close()


def check_firefox(root, work, environment, lines):
    """The same extension, unsigned, as a temporary add-on of headless Firefox ESR: a line reaches Lines."""
    firefox = Firefox(root / "usr", work, environment)
    try:
        text = f"Hello from Firefox, {time.time_ns()}"
        url = "https://example.com/firefox"
        title, shown = firefox.send_page(text, url)
        say(f"Firefox's extension page: {title}: {shown}")
        reply = json.loads(shown) if title == "LineGrabber: sent" else None
        if not isinstance(reply, dict) or reply.get("ok") is not True:
            raise Failure(f"Firefox's extension page shows {title!r}: {shown!r}; Firefox's output:\n{firefox.log()}")
        line = lines.next_line("the line from Firefox")
        if line.partition(" (")[0] != f"lines: {json.dumps(text)} from {url}":
            raise Failure(f"Lines showed {line!r}, not the line Firefox sent ({text!r} from {url})")
    finally:
        firefox.close()


def check_missing_host(root, work, environment):
    """The manifest installed but the host's executable missing: the extension's error reply."""
    tree = work / "nohost"
    for path in (MANIFEST.parent, EXTENSION):
        shutil.copytree(root / path.relative_to("/"), tree / path.relative_to("/"))
    browser = Browser(tree / "usr", work, "nohost", environment)
    try:
        session = browser.extension_worker()
        missing = browser.evaluate(session, "sendLine('nobody hears this', 'https://example.com/')")
        say(f"with the host's executable missing: {json.dumps(missing)}")
        if (
            not isinstance(missing, dict)
            or missing.get("ok") is not False
            or "native" not in str(missing.get("error")).lower()
        ):
            raise Failure(f"with no host the extension did not report the failure: {missing!r}")
    finally:
        browser.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--enter"]:
        enter_namespace(sys.argv[2])
        os.execvp(sys.argv[3], sys.argv[3:])
    try:
        sys.exit(main())
    except Failure as failure:
        print(f"browser: FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
