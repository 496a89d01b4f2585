"""The rendered board in a real browser: `board serve` in a subprocess, Debian's Chromium headless via
selenium and /usr/bin/chromedriver (no driver download). Skipped when those are not installed, unless
SEMCAL_REQUIRE_BROWSER=1 (CI sets it, so a missing browser fails there instead of skipping)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from leaderboards import db as DB
from leaderboards.cli import main
from leaderboards.registry import load_registry
from leaderboards.site import render

import board_fixtures as S  # tests/board_fixtures.py: synthetic runs (tests/ is on sys.path)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
EVIL = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
TIERS = {"model-good": "verified", "model-cold": "verified", EVIL: "spot-checked"}  # the rest: self-reported


def _need_browser():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("selenium")
    if missing:
        msg = f"browser test needs {', '.join(missing)} (apt-get install chromium chromium-driver; pip install selenium)"
        if os.environ.get("SEMCAL_REQUIRE_BROWSER") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("board")
    tasks = S.write_synth_tasks(tmp / "tasks")
    metrics = load_registry(tasks)["semcal_synth_cls"].metrics
    db = str(tmp / "board.sqlite")
    items = S.cls_items(200, seed=5)
    runs = [
        ("good", "model-good", {"constrained": items, "prior": S.prior_items(items)}),
        ("hot", EVIL, {"constrained": S.cls_items(200, seed=5, temperature=0.4)}),
        ("cold", "model-cold", {"constrained": S.cls_items(200, seed=5, temperature=3.0)}),
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMCAL_BOARD_TASKS_DIR", str(tasks))  # where write_run puts the synthetic dataset
        for name, model, filters in runs:
            S.write_run(tmp / name, "semcal_synth_cls", filters, metrics, model_name=model)  # names the model
            rc = main(["submit", str(tmp / name), "--model-name", model, "--method", "base", "--db", db,
                       "--tasks-dir", str(tasks)])
            assert rc == 0
    con = sqlite3.connect(db)
    try:  # the board's tier column (schema v2); without it the tiers are set on the loaded entries below
        for model, tier in TIERS.items():
            con.execute("UPDATE submissions SET tier = ? WHERE model_name = ?", (tier, model))
        con.commit()
    except sqlite3.OperationalError:
        pass
    finally:
        con.close()
    con = DB.connect(db)
    entries = DB.load_entries(con)
    con.close()
    for en in entries:
        en.setdefault("tier", TIERS.get(en["model_name"], "self-reported"))
    render(entries, tmp / "site", warn=None)
    return tmp / "site"


@pytest.fixture(scope="module")
def server(site):
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "leaderboards.cli", "serve", "--site", str(site), "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = proc.stdout.readline()
    assert f"http://127.0.0.1:{port}/" in line, line
    yield f"http://127.0.0.1:{port}/"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def driver():
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="semcal-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
              "--window-size=1400,900"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(30)
    yield d
    d.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _ece_values(d):
    from selenium.webdriver.common.by import By

    table = d.find_element(By.ID, "board")
    heads = [th.get_attribute("data-key") for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    col = heads.index("ece")
    vals = []
    for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        if tr.is_displayed():
            vals.append(float(tr.find_elements(By.TAG_NAME, "td")[col].get_attribute("data-v")))
    return vals


def test_table_renders_sorts_and_filters(site, server, driver, tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    driver.get(server)
    rows = driver.find_elements(By.CSS_SELECTOR, "#board tbody tr")
    n_ref = len(driver.find_elements(By.CSS_SELECTOR, "#board tbody tr.ref"))
    assert len(rows) == 3 + n_ref and n_ref >= 1  # three models + the reference rows (prior, ...)
    assert f"{len(rows)} of {len(rows)} rows" in driver.find_element(By.ID, "count").text

    # the hostile model name is shown as text and none of it ran
    assert driver.execute_script("return window.__xss") is None
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text
    cells = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "#board tbody td:nth-child(2)")]
    assert EVIL in cells

    ece_head = driver.find_element(By.CSS_SELECTOR, '#board th[data-key="ece"] button')
    ece_head.click()
    asc = _ece_values(driver)
    assert asc == sorted(asc) and len(asc) == len(rows) and len(set(asc)) >= 4
    assert driver.find_element(By.CSS_SELECTOR, '#board th[data-key="ece"]').get_attribute("aria-sort") == "ascending"
    ece_head.click()
    desc = _ece_values(driver)
    assert desc == sorted(asc, reverse=True)
    # the row the browser puts first is the model the exported data says is worst calibrated
    first = driver.find_element(By.CSS_SELECTOR, "#board tbody tr td:nth-child(2)").text
    exported = json.loads((site / "board.json").read_text())["entries"]
    worst = max(exported, key=lambda r: r["ece"])
    assert first == ("reference predictor" if worst["is_reference"] else worst["model_name"])

    box = driver.find_element(By.ID, "q")
    box.send_keys("model-cold")
    assert len(_ece_values(driver)) == 1
    box.clear()
    box.send_keys(" ")  # an input event so the filter re-runs on the cleared box
    driver.find_element(By.ID, "show-ref").click()
    assert len(_ece_values(driver)) == 3  # the model rows

    shot = Path(os.environ.get("SEMCAL_BOARD_SCREENSHOTS", tmp_path)) / "board-index.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(shot))


def test_entry_page_shows_reliability_diagram(server, driver, tmp_path):
    from selenium.webdriver.common.by import By

    driver.get(server)
    driver.find_element(By.LINK_TEXT, "model-good").click()
    deadline = time.time() + 10
    while "entries/" not in driver.current_url:
        assert time.time() < deadline
        time.sleep(0.1)
    imgs = driver.find_elements(By.CSS_SELECTOR, "img.reliability")
    n_rows = len(driver.find_elements(By.CSS_SELECTOR, "#entry tbody tr"))
    assert len(imgs) == n_rows >= 2  # constrained and the reference rows of this submission
    for img in imgs:
        ok = driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img)
        assert ok and ok > 100
    text = driver.find_element(By.TAG_NAME, "body").text
    assert "lm-eval version" in text and "0.4.13" in text and "numpy_seed" in text
    shot = Path(os.environ.get("SEMCAL_BOARD_SCREENSHOTS", tmp_path)) / "board-entry.png"
    assert driver.save_screenshot(str(shot))


def _visible_rows(d):
    from selenium.webdriver.common.by import By

    table = d.find_element(By.ID, "board")
    heads = [th.get_attribute("data-key") for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    out = []
    for tr in table.find_elements(By.CSS_SELECTOR, "tbody tr"):
        if tr.is_displayed():
            tds = tr.find_elements(By.TAG_NAME, "td")
            out.append({k: td.text for k, td in zip(heads, tds)})
    return out


def test_tier_column_and_verified_only_toggle(site, server, driver):
    from selenium.webdriver.common.by import By

    driver.get(server)
    visible = _visible_rows(driver)
    rows = {r["model"]: r for r in visible}
    assert rows["model-good"]["tier"] == "verified" and rows["model-cold"]["tier"] == "verified"
    assert rows[EVIL]["tier"] == "spot-checked"
    n_ref = sum(r["model"] == "reference predictor" for r in visible)
    assert n_ref >= 1 and all(r["tier"] for r in visible)  # reference rows show their submission's tier
    all_ranks = {m: r["ece_rank"] for m, r in rows.items() if m != "reference predictor"}
    exported = {r["model_name"]: r for r in json.loads((site / "board.json").read_text())["entries"]
                if not r["is_reference"]}
    assert {m: str(exported[m]["ece_rank"]) for m in all_ranks} == all_ranks

    driver.find_element(By.ID, "verified-only").click()
    shown = {r["model"]: r for r in _visible_rows(driver)}
    # the spot-checked row is hidden; the reference row stays (it is no competitor)
    assert set(shown) == {"model-good", "model-cold", "reference predictor"}
    assert f"{2 + n_ref} of {3 + n_ref} rows" in driver.find_element(By.ID, "count").text
    # ranks are now among verified entries only: 1 and 2, in ECE order, whatever the spot-checked row did
    ver = sorted(("model-good", "model-cold"), key=lambda m: exported[m]["ece"])
    assert [all_ranks[m] for m in ver] != ["1", "2"]  # the spot-checked row sits between them overall
    assert [shown[m]["ece_rank"] for m in ver] == ["1", "2"]
    assert [str(exported[m]["ece_rank_verified"]) for m in ver] == ["1", "2"]
    assert not driver.find_element(By.ID, "overall-table").is_displayed()
    assert driver.find_element(By.ID, "overall-verified").is_displayed()
    # sorting by the rank column follows the verified ranks
    driver.find_element(By.CSS_SELECTOR, '#board th[data-key="ece_rank"] button').click()
    models = [r["model"] for r in _visible_rows(driver) if r["model"] != "reference predictor"]
    assert models == ver

    driver.find_element(By.ID, "verified-only").click()
    assert f"{3 + n_ref} of {3 + n_ref} rows" in driver.find_element(By.ID, "count").text
    assert {m: r["ece_rank"] for m, r in ((r["model"], r) for r in _visible_rows(driver))
            if m != "reference predictor"} == all_ranks
    driver.find_element(By.LINK_TEXT, "model-cold").click()
    deadline = time.time() + 10
    while "entries/" not in driver.current_url:
        assert time.time() < deadline
        time.sleep(0.1)
    assert driver.find_element(By.ID, "tier").text.startswith("Tier: verified")
