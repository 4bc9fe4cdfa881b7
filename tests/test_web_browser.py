"""The web view in a real browser (issue 12): headless Debian Chromium driven by Selenium
through Debian's chromedriver, against ``kb-mcp web`` running as a real subprocess on a
real library. Search, open a cited result (its line anchor highlighted), follow a
relation, open entities and the other pages, a screenshot of each (into ``tmp_path``,
checked to be a real picture, not a blank page).

Selenium, not Playwright: Playwright's Python package wants its own browser build and a
driver it downloads (nothing is downloaded here); Selenium talks to the system
``chromedriver`` through ``Service(executable_path)`` and never fetches anything.
Skipped, with the reason, only when no chromium / chromedriver is installed
(``.ci/run`` installs them).
"""

from __future__ import annotations

import shutil
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from test_web import make_library
from test_web_security import web_process

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="no chromium / chromedriver on this machine (apt-get install chromium "
    "chromium-driver; .ci/run does)",
)
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
)
CITED_BACKGROUND = "rgba(255, 244, 194, 1)"  # .cited in web/static/web.css


@contextmanager
def chromium(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium (a fresh profile in ``tmp_path``) under the system chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def png_detail(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the decoded image data) of a PNG: a blank
    page decodes to a handful of values, a page with text and colours to a hundred+."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, offset = b"", 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def submit(driver: Any, field: Any) -> None:
    """Submit ``field``'s form and wait for the page it leads to. Selenium's ``submit``
    runs a script and returns at once, unlike a click, which waits for the navigation
    it starts: a look right after would find the page being left."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.expected_conditions import staleness_of
    from selenium.webdriver.support.wait import WebDriverWait

    leaving = driver.find_element(By.TAG_NAME, "html")
    field.submit()
    WebDriverWait(driver, 60).until(staleness_of(leaving))
    WebDriverWait(driver, 60).until(
        lambda driver: driver.execute_script("return document.readyState") == "complete"
    )


def shoot(driver: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)), name
    width, height, values = png_detail(path.read_bytes())
    assert width >= 800 and height >= 600, (name, width, height)
    assert values > 40, f"{name}: screenshot looks blank ({values} distinct byte values)"
    return path


def test_browser_search_open_cited_result_follow_relation_entities(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    """issue 12 (done when): search, open a cited result with its lines highlighted,
    follow a relation, open entities; every page screenshotted and not blank."""
    from selenium.webdriver.common.by import By

    library = make_library(tmp_path)
    home = library.home
    old = library.lookup.read("retention.md").doc
    errata = library.lookup.read("errata.md").doc
    library.close()
    shots = tmp_path / "shots"
    shots.mkdir()
    with web_process(home, child_env) as url, chromium(tmp_path) as driver:
        driver.get(url)
        assert driver.find_element(By.TAG_NAME, "h1").text == "Library"
        assert "broken.docx" in driver.page_source
        shoot(driver, shots, "library")

        box = driver.find_element(By.CSS_SELECTOR, "header form.quick input[name=q]")
        box.send_keys("audit log retention days")
        submit(driver, box)
        hits = driver.find_elements(By.CSS_SELECTOR, "article.hit")
        assert len(hits) >= 2, driver.page_source[:2000]
        assert driver.find_elements(By.CSS_SELECTOR, "article.hit mark")
        assert "corrected by" in driver.page_source
        shoot(driver, shots, "search")

        cited = next(
            a
            for a in driver.find_elements(By.CSS_SELECTOR, "a.cite")
            if f"/doc/{old}?" in a.get_attribute("href")
        )
        href = cited.get_attribute("href")
        fragment = href.split("#", 1)[1]
        cited.click()
        assert unquote(driver.current_url).endswith("#" + fragment)
        block = driver.find_element(By.ID, fragment)
        assert "cited" in block.get_attribute("class")
        assert block.value_of_css_property("background-color") == CITED_BACKGROUND
        top = driver.execute_script("return arguments[0].getBoundingClientRect().top", block)
        assert 0 <= top < 1000, f"the cited lines are not scrolled into view (top {top})"
        shoot(driver, shots, "document-cited")

        relation = driver.find_element(By.CSS_SELECTOR, "a.relation")
        assert relation.text.startswith("corrected by")
        relation.click()
        assert driver.current_url.endswith(f"/doc/{errata}")
        assert driver.find_element(By.TAG_NAME, "h1").text.startswith("Errata")
        assert f"corrects {old}" in driver.page_source
        shoot(driver, shots, "document-relation")

        driver.find_element(By.LINK_TEXT, "Entities").click()
        search = driver.find_element(By.CSS_SELECTOR, "main form input[name=q]")
        search.send_keys("BlobStore")
        submit(driver, search)
        assert driver.find_elements(By.CSS_SELECTOR, "section.entity")
        svg = driver.find_element(By.CSS_SELECTOR, "svg.graph")
        assert svg.size["width"] > 300 and len(svg.find_elements(By.TAG_NAME, "circle")) > 1
        shoot(driver, shots, "entities")

        driver.find_element(By.LINK_TEXT, "Audit").click()
        assert driver.find_element(By.TAG_NAME, "h1").text == "Audit log"
        shoot(driver, shots, "audit")
        # No script ran and none was allowed: the CSP blocks even an injected one.
        assert driver.execute_script("return document.scripts.length") == 0
    assert sorted(p.name for p in shots.iterdir()) == [
        "audit.png",
        "document-cited.png",
        "document-relation.png",
        "entities.png",
        "library.png",
        "search.png",
    ]
