"""The web page in a real browser: Debian's headless Chromium, driven through selenium and chromedriver
(`apt-get install chromium chromium-driver`; a browser download cannot work here), against a real uvicorn
server with a model over the MetaQA sample. It types questions and checks what the page renders: the
answers, the chain hop by hop with each supporting mention highlighted, an entity expanded to its passages,
and errors shown in the page."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'drkit[serve]'")
pytest.importorskip("selenium", reason="selenium is not installed (the test extra)")

from serve_fixtures import QUESTIONS, live_server, sample_run  # noqa: E402,F401
from test_reader import reader_run  # noqa: E402,F401  (a fixture)
from test_retrieve import mixing_run  # noqa: E402,F401  (a fixture)

from drkit.data.text import fold  # noqa: E402
from drkit.serve.app import ServeConfig, create_app  # noqa: E402
from drkit.serve.engine import Engine  # noqa: E402
from drkit.serve.views import Request  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; "
           ".ci/run installs them)")


@pytest.fixture(scope="module")
def engine(sample_run):  # noqa: F811
    return Engine.load(*sample_run)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1200,2000", f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def js_score(x: float) -> str:
    """A score as app.js writes it: 3 decimals, or 1 digit of exponent form (JS style, 5.0e-4) below 0.001."""
    if x >= 1e-3 or x == 0:
        return f"{x:.3f}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def wait(driver, condition, timeout=60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def ask(driver, question: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    driver.find_element(By.ID, "ask").click()
    wait(driver, lambda d: d.find_element(By.ID, "status").text.startswith("answered")
         or d.find_element(By.ID, "error").is_displayed())


def test_the_page_renders_answers_and_the_chain(engine, browser):
    from selenium.webdriver.common.by import By

    want = engine.run([QUESTIONS[0]], Request(top_k=5))[0]
    with live_server(create_app(engine, ServeConfig())) as url:
        browser.get(url + "/")
        wait(browser, lambda d: "2-hop model over 1,624 entities" in d.find_element(By.ID, "model-info").text)
        ask(browser, QUESTIONS[0])
        result = browser.find_element(By.CSS_SELECTOR, ".result")
        assert result.find_element(By.TAG_NAME, "h2").text == QUESTIONS[0]
        rows = result.find_elements(By.CSS_SELECTOR, "table.answers tr")
        assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == [a["entity"] for a in want["answers"]]
        assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows] == [js_score(a["score"]) for a in want["answers"]]
        hops = result.find_elements(By.CSS_SELECTOR, "section.hop")
        assert [h.find_element(By.TAG_NAME, "strong").text for h in hops] == ["Hop 1", "Hop 2"]
        for hop, want_hop in zip(hops, want["chain"]):
            entities = hop.find_elements(By.CSS_SELECTOR, ".hop-entity")
            assert [e.find_element(By.CSS_SELECTOR, ".entity-name").text for e in entities] == [
                e["entity"] for e in want_hop["entities"]]
            for e, want_e in zip(entities, want_hop["entities"]):
                # the supporting mention is highlighted, and it names the entity
                mark = e.find_element(By.CSS_SELECTOR, ".passage mark")
                assert fold(mark.text) == fold(want_e["entity"])
                assert want_e["evidence"]["title"] in e.find_element(By.CSS_SELECTOR, ".passage .title").text

        # an intermediate entity expands to its passages, each mention highlighted
        first = hops[0].find_element(By.CSS_SELECTOR, ".hop-entity")
        first.find_element(By.CSS_SELECTOR, "button.expand").click()
        holder = first.find_element(By.CSS_SELECTOR, ".entity-passages")
        wait(browser, lambda d: holder.find_elements(By.CSS_SELECTOR, ".passage mark"))
        name = fold(want["chain"][0]["entities"][0]["entity"])
        assert all(fold(m.text) == name for m in holder.find_elements(By.CSS_SELECTOR, "mark"))
        first.find_element(By.CSS_SELECTOR, "button.expand").click()  # and folds back
        assert not holder.find_elements(By.CSS_SELECTOR, ".passage")


def test_mention_offsets_count_code_points_as_the_server_does(engine, browser):
    """Python's offsets count code points, JavaScript's strings UTF-16 units: after an emoji they differ."""
    text = "\U0001F600 \u00e9t\u00e9 \U00010348 Irwin Allen wrote it"
    start = text.index("Irwin Allen")
    with live_server(create_app(engine, ServeConfig())) as url:
        from selenium.webdriver.common.by import By

        browser.get(url + "/")
        wait(browser, lambda d: d.find_element(By.ID, "model-info").text)
        marked = browser.execute_script("return Array.from(highlighted(arguments[0], [[arguments[1], arguments[2]]], "
                                        "false).querySelectorAll('mark')).map((m) => m.textContent)",
                                        text, start, start + len("Irwin Allen"))
    assert marked == ["Irwin Allen"]


def test_the_page_shows_errors(engine, browser):
    from selenium.webdriver.common.by import By

    with live_server(create_app(engine, ServeConfig())) as url:
        browser.get(url + "/")
        # a question naming no entity of the index: that question's own error, in its place
        ask(browser, "who directed the films written by nobody we know")
        assert "entity" in browser.find_element(By.CSS_SELECTOR, ".result .error").text
        # a request the API refuses (the page's own length limit taken off): the API's message, in the page
        browser.execute_script("document.getElementById('question').removeAttribute('maxlength')")
        ask(browser, "x" * 1001)
        error = browser.find_element(By.ID, "error")
        assert error.is_displayed() and "question" in error.text and "HTTP 422" in error.text
        assert not browser.find_elements(By.CSS_SELECTOR, ".result")
    # the server gone: the page says it could not reach it
    browser.find_element(By.ID, "question").clear()
    ask(browser, QUESTIONS[0])
    assert "could not reach the server" in browser.find_element(By.ID, "error").text


def test_the_page_shows_pi_and_passages_of_a_hop_mixing_model(mixing_run, browser):  # noqa: F811
    import json

    from selenium.webdriver.common.by import By

    d = mixing_run
    engine = Engine.load(d / "index1", d / "run")
    question = json.loads((d / "questions1.jsonl").read_text().splitlines()[0])["question"]
    want = engine.run([question], Request(top_k=5))[0]
    with live_server(create_app(engine, ServeConfig())) as url:
        browser.get(url + "/")
        wait(browser, lambda d: "Hop-mixing model" in d.find_element(By.ID, "model-info").text)
        ask(browser, question)
        result = browser.find_element(By.CSS_SELECTOR, ".result")
        assert [p.text for p in result.find_elements(By.CSS_SELECTOR, ".pi div")] == [
            f"{t} hop(s): {js_score(p)}" for t, p in enumerate(want["pi"])]
        rows = result.find_elements(By.CSS_SELECTOR, "table.passages tr")
        assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == [
            f"{p['title']} ({p['id']})" for p in want["passages"]]
        hops = result.find_elements(By.CSS_SELECTOR, "section.hop strong")
        assert [h.text for h in hops] == ["Z₀: the entities linked in the question"] + [
            f"Hop {t}" for t in range(1, len(want["chain"]))]


def test_the_page_shows_the_readers_answer_with_its_sentences_marked(mixing_run, reader_run, browser):  # noqa: F811
    import json

    from selenium.webdriver.common.by import By

    d = mixing_run
    engine = Engine.load(d / "index1", d / "run", reader=reader_run)
    question = json.loads((d / "questions1.jsonl").read_text().splitlines()[1])["question"]
    want = engine.run([question], Request(top_k=5))[0]["reading"]
    with live_server(create_app(engine, ServeConfig())) as url:
        browser.get(url + "/")
        wait(browser, lambda d: "Hop-mixing model" in d.find_element(By.ID, "model-info").text)
        ask(browser, question)
        box = browser.find_element(By.CSS_SELECTOR, ".result section.reading")
        assert box.find_element(By.CSS_SELECTOR, ".reader-answer").text == (want["answer"] or "(no answer)")
        passages = box.find_elements(By.CSS_SELECTOR, ".passage")
        assert [p.find_element(By.CSS_SELECTOR, ".title").text for p in passages] == [p["title"] for p in want["evidence"]]
        assert all(p.text.startswith(f"{w['title']} ({w['id']}):") for p, w in zip(passages, want["evidence"]))
        marked = [m.text for m in box.find_elements(By.TAG_NAME, "mark")]
        # each supporting sentence is marked (cut where the answer's span starts or ends inside it)
        assert "".join(marked).replace(" ", "") == "".join(
            s["text"] for p in want["evidence"] for s in want["supporting"] if s["passage_id"] == p["id"]).replace(" ", "")
        if want["type"] == "span":  # the span in bold, in its passage's title or text
            where = ".title strong.answer-span" if want["in_title"] else ".text strong.answer-span"
            assert "".join(x.text for x in box.find_elements(By.CSS_SELECTOR, where)) == want["answer"]
        # a two-hop question read in two steps: the steps on a line of their own
        assert want["steps"], "the question was not read in two steps: the steps' line would be untested"
        steps = box.find_element(By.CSS_SELECTOR, ".steps").text
        assert steps == f"read in two steps: “{want['steps']['inner']}” → {want['steps']['bridge']} → “{want['steps']['outer']}”"


def test_the_page_shows_a_comparison_that_settled_the_answer(mixing_run, reader_run, browser):  # noqa: F811
    import json

    from selenium.webdriver.common.by import By

    d = mixing_run
    engine = Engine.load(d / "index1", d / "run", reader=reader_run)
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    settled = [(q, r["reading"]) for q, r in zip(questions, engine.run(questions, Request(top_k=5)))
               if r.get("reading") and r["reading"].get("comparison")]
    assert settled, "no question of the sample was settled by a comparison"
    question, want = settled[0]
    with live_server(create_app(engine, ServeConfig())) as url:
        browser.get(url + "/")
        wait(browser, lambda d: "Hop-mixing model" in d.find_element(By.ID, "model-info").text)
        ask(browser, question)
        box = browser.find_element(By.CSS_SELECTOR, ".result section.reading")
        assert box.find_element(By.CSS_SELECTOR, ".reader-answer").text == want["answer"]
        assert "dates read, compared" in box.text
        line = box.find_element(By.CSS_SELECTOR, ".comparison").text
        for v in want["comparison"]["values"]:
            assert f"{v['option']}: dated {v['dates'][0]}" in line
