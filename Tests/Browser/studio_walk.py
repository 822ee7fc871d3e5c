#!/usr/bin/env python3
"""Walks Baton Studio in headless Chromium against a running Baton with demo data.

    studio_walk.py --base-url http://127.0.0.1:8080 --screenshots .build/studio-screenshots
    studio_walk.py --base-url … --screenshots … --studio-token <JWT with "studio": true>

Run by StudioTests (Tests/BatonServerTests/StudioTests.swift) with the tools venv's Python
(selenium) and Debian's chromium + chromium-driver. Checks, by clicking like a person would:
the contract 1 client's fallback marks beside the contract 3 client, favouriting (the menu
flips after done), Scan & Go (a label typed as text, confirm, receipt) with the flow graph
following, the lint and coverage views, labels on every input, and a console without errors.
Saves one screenshot per walked state. Exit status 0 and "STUDIO WALK OK" on success.
"""
import argparse
import json
import os
import shutil
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

parser = argparse.ArgumentParser()
parser.add_argument("--base-url", required=True)
parser.add_argument("--screenshots", required=True)
parser.add_argument("--timeout", type=float, default=30)
parser.add_argument("--studio-token", help="BATON_STUDIO=true: check the token form with this token, then stop")
parser.add_argument("--require-graphviz", action="store_true", help="fail when the server has no graphviz (it draws the flow graphs)")
args = parser.parse_args()
os.makedirs(args.screenshots, exist_ok=True)

chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
chromedriver = shutil.which("chromedriver")
if not chromium or not chromedriver:
    print("SKIP: chromium or chromedriver is not installed (scripts/bootstrap.sh --test installs them)")
    sys.exit(3)

options = Options()
options.binary_location = chromium
for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1600,1000",
                 "--force-device-scale-factor=1", "--disable-extensions", "--no-first-run"]:
    options.add_argument(argument)
options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
# The studio redraws a screen when its fit report arrives: elements found a moment ago go stale.
wait = WebDriverWait(driver, args.timeout, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
step = [0]


WINDOW = (1600, 1000)


def shot(name, full=True):
    """Saves a screenshot: the whole page (full) or the window as a person first sees it."""
    step[0] += 1
    path = os.path.join(args.screenshots, f"{step[0]:02d}-{name}.png")
    if full:
        chrome = WINDOW[1] - driver.execute_script("return window.innerHeight")
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(WINDOW[0], min(max(height, WINDOW[1] - chrome) + chrome, 4000))
        time.sleep(0.3)
    driver.save_screenshot(path)
    if full:
        driver.set_window_size(*WINDOW)
    print("screenshot", path)


def client(number):
    return driver.find_element(By.CSS_SELECTOR, f'article.client[data-client="{number}"]')


def wait_for(description, condition):
    try:
        return wait.until(lambda _: condition())
    except TimeoutException:
        shot("FAILED-" + description.replace(" ", "-")[:40])
        raise AssertionError("timed out waiting for: " + description)


def click(description, finder):
    """Waits for the element `finder` returns and clicks it, finding it again if it was redrawn."""
    def attempt():
        element = finder()
        if element is None:
            return False
        element.click()
        return True
    wait_for(description, attempt)


def find(root, selector):
    found = root.find_elements(By.CSS_SELECTOR, selector)
    return found[0] if found else None


def button_with_text(root, text, selector="button"):
    for candidate in root.find_elements(By.CSS_SELECTOR, selector):
        if candidate.text.strip() == text and candidate.is_displayed():
            return candidate
    return None


def texts(root, selector):
    return [e.text for e in root.find_elements(By.CSS_SELECTOR, selector)]


def idle():
    """No request in flight for a moment (the studio fetches screen, fit report, sessions)."""
    time.sleep(0.4)


def assert_labelled(where):
    """Every form control on the page now has a label (or an aria-label): called wherever the walk
    shows inputs that go away later (the input sheet is emptied when it closes)."""
    unlabelled = driver.execute_script("""
        return [...document.querySelectorAll('input, select, textarea')].filter((e) =>
            e.type !== 'hidden' && !e.hidden && !e.getAttribute('aria-label') && !(e.id && document.querySelector(`label[for="${e.id}"]`))
            && !e.closest('label')).map((e) => e.outerHTML.slice(0, 120));""")
    assert not unlabelled, f"inputs without labels {where}: {unlabelled}"


def token_mode():
    """BATON_STUDIO=true: the page asks for a studio token, then works as an anonymous device."""
    driver.get(args.base_url + "/studio")
    wait_for("the token form", lambda: driver.find_element(By.ID, "studio-token").is_displayed())
    assert "needs a studio token" in driver.find_element(By.ID, "mode").text, driver.find_element(By.ID, "mode").text
    shot("token-form")
    field = driver.find_element(By.ID, "studio-token")
    assert driver.switch_to.active_element == field, "the token field takes focus"
    field.send_keys(args.studio_token)
    field.send_keys(Keys.ENTER)
    wait_for("two clients rendering home", lambda: len(driver.find_elements(By.CSS_SELECTOR, "article.client .baton-screen")) == 2)
    subject = Select(client(1).find_element(By.CSS_SELECTOR, 'select[id$="-subject"]')).first_selected_option.get_attribute("value")
    assert subject == "device", f"no demo users outside development, got {subject}"
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="catalog"]').click()
    wait_for("contract 1 marks through the studio token",
             lambda: any("artworkRow → detailRow (contract 1)" in t for t in texts(client(2), ".studio-mark")))
    idle()
    shot("token-mode-catalog")
    # The only console errors: the studio API's 401 before the token was given, which must be
    # there (the proof that the console is captured).
    console = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert any("401" in e["message"] for e in console), "the studio API's 401 is not in the captured console"
    problems = [e for e in console if "401" not in e["message"]]
    assert not problems, "console errors:\n" + "\n".join(e["message"] for e in problems)
    print("STUDIO TOKEN MODE OK")


try:
    if args.studio_token:
        token_mode()
        sys.exit(0)
    driver.get(args.base_url + "/studio")
    wait_for("two clients rendering home", lambda: len(driver.find_elements(By.CSS_SELECTOR, "article.client .baton-screen")) == 2)
    # A console error of the walk's own, which the check at the end must find: the proof that
    # the browser's console is being captured at all.
    driver.execute_script("console.error('studio-walk console probe')")
    idle()
    shot("home")

    # Every component and action type of the contract has a renderer.
    config = json.load(urllib.request.urlopen(args.base_url + "/studio/api/config"))
    assert config.get("graphviz") or not args.require_graphviz, "the server has no graphviz: the flow graph checks would be skipped"
    rendered = set(driver.execute_script("return BatonRender.componentTypes()"))
    performed = set(driver.execute_script("return BatonRender.actionTypes()"))
    missing = (set(config["components"]) - rendered) | (set(config["actions"]) - performed)
    assert not missing, f"no web renderer for {sorted(missing)}"

    # Side by side: contract 1 gets fallbacks, each marked with its reason.
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="catalog"]').click()
    wait_for("contract 1 marks on the catalog",
             lambda: any("artworkRow → detailRow (contract 1)" in t for t in texts(client(2), ".studio-mark")))
    marks2 = texts(client(2), ".studio-mark")
    assert any("artworkHeader → header (contract 1)" in t for t in marks2), marks2
    assert client(2).find_elements(By.CSS_SELECTOR, '[data-component-type="detailRow"]'), "contract 1 should draw detail rows"
    # Client 1 draws on its own: its catalog first, then the absence of marks on it.
    wait_for("contract 3's artwork rows", lambda: client(1).find_elements(By.CSS_SELECTOR, '[data-component-type="artworkRow"]'))
    assert not client(1).find_elements(By.CSS_SELECTOR, ".studio-mark"), texts(client(1), ".studio-mark")
    idle()
    shot("catalog-side-by-side", full=False)

    # Every component drawn by the renderer (contract 3), and every fallback marked (contract 1),
    # omissions where the component would have been.
    # StudioTests copies Tests/Fixtures/studio/gallery.yaml in: without it, none of this is checked.
    assert driver.find_elements(By.CSS_SELECTOR, '#screens button[data-screen="gallery"]'), "the gallery screen is missing"
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="gallery"]').click()
    wait_for("the gallery's omission in place", lambda: any("badge omitted: needs contract 2" in t for t in texts(client(2), ".studio-ghost")))
    expected = {"header", "text", "badge", "richText", "carousel", "artworkRow", "image", "spacer", "textField", "list", "detailRow", "button"}

    def drawn():
        return {e.get_attribute("data-component-type") for e in client(1).find_elements(By.CSS_SELECTOR, ".device__screen [data-component-type]")}

    # Client 1 renders on its own: waited for as client 2 was, and read again if it
    # redraws while being read (a stale element), rather than read once mid-render.
    wait_for("the gallery drawn by contract 3", lambda: expected <= drawn())
    marks2 = texts(client(2), ".studio-mark")
    for note in ["carousel → list (contract 1)", "richText → text (contract 1)", "artworkRow → detailRow (contract 1)"]:
        assert any(note in t for t in marks2), (note, marks2)
    assert any("menu item “Share this” omitted: needs contract 2" in t for t in texts(client(2), ".marks__list li"))
    assert button_with_text(client(1), "Share this", ".baton-menu__item"), "contract 3 with share_sheet keeps the menu item"
    assert_labelled("on the gallery")
    idle()
    shot("gallery-side-by-side", full=False)
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="catalog"]').click()
    wait_for("the catalog again", lambda: find(client(1), 'button[data-component-type="artworkRow"]'))

    # Favouriting in client 1 (contract 3): the menu flips after done.
    # By keyboard: Enter on a row navigates, and focus follows onto the new screen.
    row = wait_for("an artwork row", lambda: find(client(1), 'button[data-component-type="artworkRow"]'))
    row.send_keys(Keys.ENTER)
    wait_for("the playlist menu", lambda: button_with_text(client(1), "Add playlist to favourites", ".baton-menu__item"))
    wait_for("focus on the new screen", lambda: driver.switch_to.active_element == find(client(1), ".device__screen"))
    idle()
    shot("playlist-menu")
    click("the favourite menu item", lambda: button_with_text(client(1), "Add playlist to favourites", ".baton-menu__item"))
    wait_for("the done toast", lambda: any("Added" in t for t in texts(client(1), ".toast--done")))
    wait_for("the menu flipped", lambda: button_with_text(client(1), "Remove playlist from favourites", ".baton-menu__item"))
    assert not button_with_text(client(1), "Add playlist to favourites", ".baton-menu__item")
    summaries = texts(client(1), ".exchange summary")
    assert any("POST /v3/command → 200 done" in s for s in summaries), summaries
    assert any("GET /v3/screens/playlist" in s and "ETag" in s for s in summaries), summaries
    idle()
    shot("favourited")

    # Exactly once: the identical command again answers the stored reply, marked as a replay.
    done = next(e for e in client(1).find_elements(By.CSS_SELECTOR, ".exchange")
                if "POST /v3/command → 200 done" in e.find_element(By.CSS_SELECTOR, "summary").text)
    if done.get_attribute("open") is None:
        done.find_element(By.CSS_SELECTOR, "summary").click()
    done.find_element(By.CSS_SELECTOR, ".exchange__again").click()
    wait_for("the replayed command", lambda: any("(Idempotent-Replay)" in s for s in texts(client(1), ".exchange summary")))
    idle()
    shot("replayed")

    # Scan & Go in client 1: type the label, confirm, receipt.
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="send-parcel"]').click()
    wait_for("drop-off locations", lambda: find(client(1), 'button[data-component-id="location-UT-0001"]'))
    click("location UT-0001", lambda: find(client(1), 'button[data-component-id="location-UT-0001"]'))
    wait_for("the scan screen", lambda: find(client(1), ".baton-scanner input"))
    wait_for("the scan state's fit report", lambda: "state scan" in client(1).find_element(By.CSS_SELECTOR, ".marks").text)
    field = find(client(1), ".baton-scanner input")
    assert field.get_attribute("id") and find(client(1), f'label[for="{field.get_attribute("id")}"]'), "the scanner field has no label"
    idle()
    shot("scan")
    field.send_keys("3SDEMO0000001")
    field.send_keys(Keys.ENTER)
    wait_for("the confirm screen", lambda: button_with_text(client(1), "Confirm drop-off"))
    wait_for("the graph at confirm", lambda: "confirm" in (find(driver, "#walk-graph h2").text if find(driver, "#walk-graph h2") else ""))
    if config.get("graphviz"):
        wait_for("the highlighted state", lambda: find(driver, "#walk-graph g.graph__current"))
    idle()
    shot("scan-confirm")
    click("confirm drop-off", lambda: button_with_text(client(1), "Confirm drop-off"))
    wait_for("the receipt", lambda: any("Receipt" in t for t in texts(client(1), ".baton-header__title")))
    wait_for("the graph at receipt", lambda: "receipt" in find(driver, "#walk-graph h2").text)
    idle()
    shot("receipt")
    click("done", lambda: button_with_text(client(1), "Done"))
    wait_for("the dropped-off toast", lambda: any("Parcel dropped off" in t for t in texts(client(1), ".toast--done")))
    wait_for("back on send-parcel", lambda: find(client(1), 'button[data-component-id="location-UT-0001"]'))
    idle()
    shot("dropped-off")

    # Scan & Go in client 2 (contract 1, no scanner): the scanner arrives as a text field, marked.
    wait_for("client 2's drop-off locations", lambda: find(client(2), 'button[data-component-id="location-UT-0002"]'))
    click("location UT-0002", lambda: find(client(2), 'button[data-component-id="location-UT-0002"]'))
    wait_for("the scanner's fallback mark", lambda: any("barcodeScanner → textField (contract 1)" in t for t in texts(client(2), ".studio-mark")))
    field = find(client(2), 'form[data-component-id="scanner"][data-component-type="textField"] input')
    assert field is not None, "contract 1 should get a text field for the scanner"
    assert_labelled("with contract 1's text field for the scanner")
    idle()
    shot("contract-1-scan")
    field = find(client(2), 'form[data-component-id="scanner"][data-component-type="textField"] input')
    field.send_keys("3SDEMO0000002")
    field.send_keys(Keys.ENTER)
    wait_for("client 2's confirm screen", lambda: button_with_text(client(2), "Confirm drop-off"))
    idle()
    shot("contract-1-scan-confirm")
    click("cancel", lambda: button_with_text(client(2), "Cancel"))
    wait_for("the refresh toast", lambda: find(client(2), ".toast--info"))
    wait_for("client 2 back on send-parcel", lambda: find(client(2), 'button[data-component-id="location-UT-0002"]'))

    # Input requests as forms in client 2 (contract 1): a choice, then a text.
    driver.find_element(By.CSS_SELECTOR, '#screens button[data-screen="catalog"]').click()
    wait_for("client 2's catalog", lambda: find(client(2), 'button[data-component-type="detailRow"]'))
    click("a catalog row", lambda: find(client(2), 'button[data-component-type="detailRow"]'))
    wait_for("client 2's tracks", lambda: find(client(2), 'button[data-component-id^="track-"]'))
    click("a track", lambda: find(client(2), 'button[data-component-id^="track-"]'))
    wait_for("the choice form", lambda: find(client(2), ".device__sheet:not([hidden]) fieldset input[type=radio]"))
    radio = find(client(2), ".device__sheet fieldset input[type=radio]")
    assert find(client(2), f'label[for="{radio.get_attribute("id")}"]'), "the choice has no label"
    idle()
    shot("choice-input")
    click("add", lambda: button_with_text(client(2), "Add", ".device__sheet button"))
    wait_for("the text form", lambda: find(client(2), ".device__sheet:not([hidden]) input[type=text]"))
    name = find(client(2), ".device__sheet input[type=text]")
    assert driver.switch_to.active_element == name, "the input sheet takes focus"
    name.send_keys("Road trip")
    assert_labelled("with the input sheet's text field")
    idle()
    shot("text-input")
    name.send_keys(Keys.ENTER)
    wait_for("the added toast", lambda: any("Road trip" in t for t in texts(client(2), ".toast--done")))
    idle()
    shot("added-to-new-playlist")

    # The flow graph tab, reached by keyboard; starting a flow that answers an error.
    tab = driver.find_element(By.ID, "tab-clients")
    tab.click()
    tab.send_keys(Keys.ARROW_RIGHT)
    assert driver.switch_to.active_element.get_attribute("id") == "tab-flow", "arrow keys move between tabs"
    wait_for("the flow graph view", lambda: find(driver, "#flow-graph .graph__caption"))
    Select(driver.find_element(By.ID, "flow-name")).select_by_value("scan-and-go")
    wait_for("the location parameter", lambda: find(driver, '#flow-params input[data-param="location"]'))
    if config.get("graphviz"):
        wait_for("the scan-and-go graph", lambda: find(driver, "#flow-graph svg") and "scan-and-go" in find(driver, "#flow-graph .graph__caption").text)
    location = find(driver, '#flow-params input[data-param="location"]')
    location.clear()
    location.send_keys("UT-9999")
    shot("flow-graph")
    driver.find_element(By.CSS_SELECTOR, '#flow-form button[type="submit"]').click()
    wait_for("the error toast", lambda: any("UT-9999" in t for t in texts(client(1), ".toast--error")))
    idle()
    shot("flow-error")

    # Lint and coverage, by keyboard from the flow tab.
    tab = driver.find_element(By.ID, "tab-flow")
    tab.click()
    driver.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    wait_for("the lint view", lambda: find(driver, "#lint table") or find(driver, "#lint .lint--clean"))
    shot("lint")
    driver.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    wait_for("the coverage view", lambda: find(driver, "#coverage table.coverage"))
    coverage = driver.find_element(By.CSS_SELECTOR, "#coverage").text
    assert "artworkRow" in coverage and "→ detailRow" in coverage, coverage[:400]
    shot("coverage")

    # Every form control left on the page has a label (or an aria-label).
    assert_labelled("at the end")

    # No console errors along the way but the probe's.
    console = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert any("studio-walk console probe" in entry["message"] for entry in console), "the browser's console is not captured"
    problems = [entry for entry in console if "studio-walk console probe" not in entry["message"]]
    assert not problems, "console errors:\n" + "\n".join(entry["message"] for entry in problems)
    print("STUDIO WALK OK")
except AssertionError as failure:
    print("FAILED:", failure)
    for entry in driver.get_log("browser"):
        print("console", entry["level"], entry["message"])
    sys.exit(1)
finally:
    driver.quit()
