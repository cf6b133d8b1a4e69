"""python -m sitebuild.screenshots [SITE]: redraw docs/screenshots/site-*.png from a built site
(default site/): the home page, a demo page at its figure, and a demo's backward page mid-step."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHOTS = ROOT / "docs" / "screenshots"
FIGURE = "adding_problem"  # not a homework task's demo, so the default site shows its figure
BACKWARD = "causal_self_attention"


def main(site=ROOT / "site"):
    from playwright.sync_api import sync_playwright

    site = pathlib.Path(site)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto((site / "index.html").resolve().as_uri())
        page.screenshot(path=str(SHOTS / "site-home.png"))
        page.goto((site / "demos" / f"{FIGURE}.html").resolve().as_uri())
        figure = page.locator(f"img[src*='{FIGURE}/figure-']").first
        figure.scroll_into_view_if_needed()
        page.evaluate("y => window.scrollBy(0, y)", figure.bounding_box()["y"] - 250)
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "site-demo.png"))
        page.goto((site / "demos" / f"{BACKWARD}.html").resolve().as_uri())
        frame_element = page.locator("iframe.backward-page")
        frame_element.scroll_into_view_if_needed()
        page.evaluate("y => window.scrollBy(0, y)", frame_element.bounding_box()["y"] - 80)
        frame = frame_element.content_frame
        frame.locator("body").click(position={"x": 5, "y": 5})
        for _ in range(4):
            page.keyboard.press("ArrowRight")
        page.wait_for_timeout(300)
        page.screenshot(path=str(SHOTS / "site-backward.png"))
        browser.close()
    print(f"wrote {', '.join(p.name for p in sorted(SHOTS.glob('site-*.png')))} in {SHOTS}")


if __name__ == "__main__":
    main(*sys.argv[1:])
