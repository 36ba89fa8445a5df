#!/usr/bin/env python3
"""The dashboard as a person sees it (ARCHITECTURE.md §18).

Starts a cluster with `manta start --head`, runs a driver with finished and failing
tasks, an actor and a metric, and opens the dashboard in headless Chromium driven
over the DevTools protocol: it logs in with the cluster token, and checks the nodes,
the actor, the finished and failed tasks with the error, a plot with points, the
logs, the timeline and a job submitted with `manta job` (and its output), saving a
screenshot of each tab. Then it checks what the routes refuse (no cookie, a forged
cookie, a wrong token, bad queries), and that the dashboard's memory stays flat while
the cluster runs 1,000,000 tasks.

Every process it starts is stopped by pid; every wait has a deadline.
"""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

import websocket  # python3-websocket

FAILURES = []


def check(condition, what):
    if condition:
        print("ok:", what)
    else:
        print("FAILED:", what)
        FAILURES.append(what)
    return condition


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    raise TimeoutError("timed out after %ss waiting for %s" % (timeout_s, what))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, cookie=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if cookie:
        headers["Cookie"] = cookie
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, response.getheader("Set-Cookie"), data


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Browser:
    """Headless Chromium over the DevTools protocol: one page."""

    def __init__(self, profile_dir):
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             "--user-data-dir=" + profile_dir, "--window-size=1400,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.next_id = 0
        self.ws = None
        try:
            self._connect()
        except BaseException:
            self._kill()
            raise

    def _connect(self):
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                raise RuntimeError("chromium exited with code %s" % self.proc.returncode)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise RuntimeError("chromium did not open its DevTools port")
        status, _, data = request(port, "GET", "/json/list")
        pages = [t for t in json.loads(data) if t.get("type") == "page"]
        # No Origin header: Chromium refuses a DevTools connection whose Origin it was
        # not told to allow (403 in some Debian 12 builds, e.g. 150), and allows one
        # without.
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        for _ in range(100000):
            message = json.loads(self.ws.recv())
            if message.get("id") == my_id:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"]))
                return message.get("result", {})
        raise RuntimeError("no answer to " + method)

    def eval(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError("page error in %r: %s" % (expression, result["exceptionDetails"]))
        return result.get("result", {}).get("value")

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            if self.ws:
                self.ws.close()
        except Exception:
            pass
        self._kill()

    def _kill(self):
        """Chromium and every process it started (its own session's process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)


def start_cluster(manta, env):
    dashboard_port = free_port()
    out = subprocess.run([manta, "start", "--head", "--port", "0", "--num-cpus", "4",
                          "--dashboard-port", str(dashboard_port), "--system-config",
                          '{"task_events_report_ms": 200, "metrics_report_period_ms": 500}'],
                         env=env, capture_output=True, text=True, timeout=120)
    print(out.stdout + out.stderr)
    if out.returncode != 0:
        raise RuntimeError("manta start failed")
    gcs = re.search(r"GCS address:\s+(\S+)", out.stdout).group(1)
    token_file = re.search(r"Cluster token:\s+(\S+)", out.stdout).group(1)
    url = re.search(r"Dashboard: (http://\S+/)", out.stdout).group(1)
    with open(token_file) as f:
        token = f.read().strip()
    return gcs, token, url


def dashboard_pid(env):
    out = subprocess.run(["pgrep", "-f", "manta_dashboard --gcs-address"], capture_output=True, text=True)
    pids = [int(p) for p in out.stdout.split()]
    # The one whose environment has our temp dir (other clusters may run alongside).
    for pid in pids:
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if env["MANTA_TEMP_DIR"].encode() in f.read():
                    return pid
        except OSError:
            pass
    return pids[0] if len(pids) == 1 else None


def check_routes(port, token):
    status, cookie, _ = request(port, "GET", "/api/list?resource=nodes")
    check(status == 401, "a data route without the cookie is refused (%s)" % status)
    status, _, _ = request(port, "GET", "/api/list?resource=nodes", cookie="manta_dashboard=" + "a" * 32 + "." + "b" * 64)
    check(status == 401, "a forged cookie is refused (%s)" % status)
    status, _, body = request(port, "POST", "/api/login", body=json.dumps({"token": "not-the-token"}))
    check(status == 401 and b"wrong cluster token" in body, "a wrong token is refused")
    status, _, body = request(port, "GET", "/api/nodes")
    check(status == 404 and b"no such route: GET /api/nodes" in body,
          "an unknown API route is a clear error, not the page (%s %s)" % (status, body[:100]))
    status, _, body = request(port, "POST", "/api/list")
    check(status == 405, "a data route with the wrong method is refused (%s)" % status)
    status, _, body = request(port, "POST", "/api/login", body="{not json")
    check(status == 400, "a malformed login is refused (%s)" % status)
    status, set_cookie, _ = request(port, "POST", "/api/login", body=json.dumps({"token": token}))
    check(status == 200 and set_cookie and "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie,
          "the right token gets an HttpOnly cookie")
    cookie = set_cookie.split(";")[0]
    status, _, body = request(port, "GET", "/api/list?resource=nodes&limit=100000000", cookie=cookie)
    check(status == 400 and b"out of range" in body, "a huge limit is a clear error (%s %s)" % (status, body[:100]))
    status, _, body = request(port, "GET", "/api/list?resource=colours", cookie=cookie)
    check(status == 400 and b"unknown resource" in body, "an unknown resource is a clear error")
    status, _, body = request(port, "GET", "/api/list?resource=tasks&filter=colour%3Dred", cookie=cookie)
    check(status == 400 and b"colour" in body, "an unknown filter field is a clear error")
    status, _, body = request(port, "GET", "/api/timeline?job_id=zz", cookie=cookie)
    check(status == 400, "a malformed job id is a clear error")
    status, _, body = request(port, "GET", "/api/metrics?since_ms=abc", cookie=cookie)
    check(status == 400, "a malformed since_ms is a clear error")
    status, _, body = request(port, "GET", "/api/metrics?since_ms=%d" % (time.time() * 1000 + 3600000), cookie=cookie)
    check(status == 200 and json.loads(body)["series"] == [], "nothing is newer than the future")
    return cookie


def wait_loaded(browser, tab, timeout_s=60):
    return wait_for(lambda: browser.eval("document.body.dataset.loaded") == tab, timeout_s, "tab " + tab)


def text_of(browser, testid):
    return browser.eval("(document.querySelector('[data-testid=\"%s\"]')||{}).textContent||''" % testid)


def check_pages(browser, url, token, artifacts):
    browser.navigate(url)
    wait_for(lambda: browser.eval("!!document.querySelector('[data-testid=\"login-form\"]')"), 60, "login form")
    browser.screenshot(os.path.join(artifacts, "login.png"))
    browser.eval("(() => { const i = document.querySelector('[data-testid=\"login-token\"]'); i.value = %s;"
                 " i.dispatchEvent(new Event('input')); document.querySelector('[data-testid=\"login-submit\"]')"
                 ".click(); return true; })()" % json.dumps(token))
    wait_loaded(browser, "overview")
    check("manta_dashboard" not in (browser.eval("document.cookie") or ""), "the session cookie is HttpOnly")
    nodes = wait_for(lambda: browser.eval(
        "document.querySelectorAll('[data-testid=\"nodes-table\"] tr[data-id]').length"), 30, "a node row")
    check(nodes >= 1, "the overview shows the node")
    check(browser.eval("document.querySelectorAll('[data-testid=\"nodes-table\"] .bar[data-resource=\"CPU\"]')"
                       ".length") >= 1, "the node has a CPU bar")
    browser.screenshot(os.path.join(artifacts, "overview.png"))

    browser.navigate(url + "#actors")
    wait_loaded(browser, "actors")
    actors = wait_for(lambda: "ALIVE" in text_of(browser, "actors-table") and text_of(browser, "actors-table"),
                      30, "the actor")
    check("Counter" in actors, "the actors tab shows the Counter actor ALIVE")
    browser.screenshot(os.path.join(artifacts, "actors.png"))

    browser.navigate(url + "#tasks")
    wait_loaded(browser, "tasks")
    errors = wait_for(lambda: browser.eval(
        "Array.from(document.querySelectorAll('[data-testid=\"tasks-table\"] .error-message'))"
        ".map(e => e.textContent).join('\\n')"), 30, "a failed task's error")
    check("failed on purpose" in errors, "the tasks tab shows a failed task's error")
    check("Square" in text_of(browser, "tasks-summary") and "FINISHED" in text_of(browser, "tasks-summary"),
          "the task summary counts the finished Square tasks")
    browser.screenshot(os.path.join(artifacts, "tasks.png"))

    browser.navigate(url + "#metrics")
    wait_loaded(browser, "metrics")
    points = wait_for(lambda: browser.eval(
        "document.querySelectorAll('[data-testid=\"plot-ray_tasks\"] svg circle').length"), 60, "plot points")
    check(points >= 2, "the ray_tasks plot has points (%s)" % points)
    # The page polls for new points only (since_ms) and adds them to what it has.
    more = wait_for(lambda: browser.eval(
        "document.querySelectorAll('[data-testid=\"plot-ray_tasks\"] svg circle').length") > points and 1, 30,
        "new plot points")
    check(more, "the plot grows as new points arrive")
    check(browser.eval("document.querySelectorAll('[data-testid=\"plot-ray_tasks\"] svg path.series').length") >= 1,
          "the ray_tasks plot has a line")
    browser.screenshot(os.path.join(artifacts, "metrics.png"))

    for tab, testid in (("placement-groups", "placement-groups-table"), ("objects", "objects-table")):
        browser.navigate(url + "#" + tab)
        wait_loaded(browser, tab)
        browser.screenshot(os.path.join(artifacts, tab + ".png"))

    browser.navigate(url + "#logs")
    wait_loaded(browser, "logs")
    files = wait_for(lambda: text_of(browser, "log-files"), 30, "log files")
    check("worker-" in files, "the logs tab lists the workers' files")
    browser.screenshot(os.path.join(artifacts, "logs.png"))

    browser.navigate(url + "#timeline")
    wait_loaded(browser, "timeline")
    slices = wait_for(lambda: browser.eval(
        "document.querySelectorAll('[data-testid=\"timeline-view\"] svg rect').length"), 30, "timeline slices")
    check(slices >= 1, "the timeline draws task slices (%s)" % slices)
    check(browser.eval("!!document.querySelector('[data-testid=\"timeline-download\"]')"), "a timeline download")
    browser.screenshot(os.path.join(artifacts, "timeline.png"))
    # Jobs: one submitted with `manta job`, its output shown when picked.
    browser.navigate(url + "#jobs")
    wait_loaded(browser, "jobs")
    jobs = wait_for(lambda: "SUCCEEDED" in text_of(browser, "submitted-jobs-table")
                    and text_of(browser, "submitted-jobs-table"), 30, "the submitted job")
    check("page-job" in jobs, "the jobs tab lists the submitted job")
    browser.eval("document.querySelector('[data-job=\"page-job\"]').click()")
    shown = wait_for(lambda: "hello from a job" in text_of(browser, "job-log-view"), 30, "the job's output")
    check(shown, "the jobs tab shows the job's output")
    browser.screenshot(os.path.join(artifacts, "jobs.png"))
    browser.navigate(url + "#overview")
    wait_loaded(browser, "overview")


def check_memory_flat(browser, url, driver, env, port, tasks):
    pid = dashboard_pid(env)
    if not check(pid is not None, "the dashboard process is found"):
        return
    browser.navigate(url + "#tasks")
    wait_loaded(browser, "tasks")
    # Warm up: the scraper's series and the page's polling reach their steady state.
    subprocess.run([driver, "tasks", "20000"], env=env, check=True, timeout=600, capture_output=True)
    before = rss_kb(pid)
    run = subprocess.run([driver, "tasks", str(tasks)], env=env, timeout=3000, capture_output=True, text=True)
    check(run.returncode == 0, "the driver ran %d tasks" % tasks)
    after = rss_kb(pid)
    print("dashboard RSS: %d kB before, %d kB after %d tasks" % (before, after, tasks))
    check(after - before < 8 * 1024, "the dashboard's memory stays flat (%+d kB)" % (after - before))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--manta", required=True)
    parser.add_argument("--driver", required=True)
    parser.add_argument("--artifacts", required=True)
    parser.add_argument("--tasks", type=int, default=1000000)
    args = parser.parse_args()
    os.makedirs(args.artifacts, exist_ok=True)
    temp = tempfile.mkdtemp(prefix="manta_dashboard_test_")
    env = dict(os.environ, MANTA_TEMP_DIR=temp)
    env.pop("RAY_ADDRESS", None)
    driver = None
    browser = None
    try:
        gcs, token, url = start_cluster(args.manta, env)
        env["RAY_ADDRESS"] = gcs
        port = urllib.parse.urlparse(url).port
        marker, release = os.path.join(temp, "marker"), os.path.join(temp, "release")
        driver = subprocess.Popen([args.driver, "work", "--marker=" + marker, "--release=" + release], env=env)
        wait_for(lambda: os.path.exists(marker) or driver.poll() is not None, 120, "the driver")
        check(driver.poll() is None, "the driver runs")
        check_routes(port, token)
        job = subprocess.run([args.manta, "job", "submit", "--wait", "--submission-id", "page-job", "--",
                              "echo hello from a job"], env=env, capture_output=True, text=True, timeout=120)
        check(job.returncode == 0, "manta job submit --wait: " + job.stdout + job.stderr)
        browser = Browser(os.path.join(temp, "chromium"))
        check_pages(browser, url, token, args.artifacts)
        check_memory_flat(browser, url, args.driver, env, port, args.tasks)
        open(release, "w").close()
        driver.wait(timeout=120)
        driver = None
    finally:
        if browser:
            browser.close()
        if driver and driver.poll() is None:
            driver.kill()
            driver.wait(timeout=30)
        subprocess.run([args.manta, "stop"], env=env, timeout=120, capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)
    print("screenshots in", args.artifacts)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
