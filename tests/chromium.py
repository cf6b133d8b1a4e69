"""Pages opened from disk in headless Chromium (Playwright): the one harness of the browser tests
(the backward page in test_viz_html.py, the course site in test_site.py). The `browser` fixture
that launches Chromium is in conftest.py."""

import pathlib
from urllib.parse import unquote, urlparse


def file_exists(url):
    """Whether url is a file:// URL of a file that is there."""
    parsed = urlparse(url)
    return parsed.scheme == "file" and pathlib.Path(unquote(parsed.path)).exists()


def any_file(url):
    """What a site of many files may load: anything under file://, nothing from the network."""
    return url.startswith("file://")


class Opened:
    """A page opened from file:// in a context of its own. A request that allowed(url) refuses is
    blocked and kept (blocked); by default only the page itself may load, as a self-contained
    page must. Kept as well: every request made (requests), every console error and uncaught
    exception (errors), and every failed request for a file that is not there (failed)."""

    def __init__(self, browser, path, allowed=None, height=900):
        self.context = browser.new_context(viewport={"width": 1400, "height": height})
        self.allowed = allowed or (lambda url: url == self.url)
        self.requests, self.blocked, self.errors, self.failed = [], [], [], []

        def route(request_route):
            if self.allowed(request_route.request.url):
                request_route.continue_()
            else:
                self.blocked.append(request_route.request.url)
                request_route.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda message: self.errors.append(message.text) if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        # a file that is not there (a request the next navigation cancels, a favicon, is no failure)
        self.page.on("requestfailed", lambda request: None if file_exists(request.url) else self.failed.append(request.url))
        self.goto(path)

    def goto(self, path):
        """Open another page in the same tab, with fresh lists of what went wrong."""
        for kept in (self.requests, self.blocked, self.errors, self.failed):
            kept.clear()
        self.url = pathlib.Path(path).resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_load_state("load")

    def close(self):
        self.context.close()
