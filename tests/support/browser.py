"""Driving a real headless Chromium with Selenium for the operator page's tests: where the browser
and its driver are, why none can be driven here, and the small moves a test makes on a page (wait,
find by CSS, read a table cell, sign in, pick an option, list the URLs seen, take a screenshot).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
REQUIRE_BROWSER = "SAMESPACE_REQUIRE_BROWSER"
CHROME_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1500,1200",
)
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
PAGE_WAIT_S = 180.0  # the status routes ask every dispatcher; on a loaded 2-core machine that takes a while


def browser_missing() -> str | None:
    """Why no browser can be driven here, or None."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        return f"{', '.join(missing)} missing (make browser)"
    try:
        import selenium  # noqa: F401  only: is it installed
    except ImportError:
        return "selenium is not installed (requirements.txt)"
    return None


def wait_for(driver: Any, condition: Callable[[Any], Any], timeout_s: float = PAGE_WAIT_S, what: str = "") -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The page re-renders a table when its data arrives: an element found a moment before may be gone.
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout_s, poll_frequency=0.2, ignored_exceptions=ignored).until(
        condition, message=what
    )


def css(driver: Any, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def field(driver: Any, row: str, name: str) -> str:
    """The text of a row's cell, e.g. field(d, "table[data-table=roles] tr[data-role=rlm]", "policy")."""
    return str(css(driver, f'{row} td[data-field="{name}"]').text)


def sign_in(driver: Any, page: str, token: str) -> None:
    driver.get(page)
    wait_for(driver, lambda d: css(d, "#token").is_displayed(), 30, "the login form")
    css(driver, "#token").send_keys(token)
    css(driver, "#signin").click()


def page_ready(driver: Any) -> bool:
    return bool(css(driver, "#status").get_attribute("data-state") == "ready")


def select(driver: Any, selector: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(css(driver, selector)).select_by_value(value)


def urls_seen(driver: Any) -> list[str]:
    """Every URL this tab loaded or fetched, and where it is now."""
    script = "return [location.href, ...performance.getEntries().map((e) => e.name)];"
    return [str(u) for u in driver.execute_script(script)]


def screenshot(driver: Any, name: str) -> Path:
    """The whole page as a PNG under tests/artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1500, min(max(height + 120, 800), 8000))
    driver.execute_script("window.scrollTo(0, 0)")
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    driver.set_window_size(1500, 1200)
    return path
