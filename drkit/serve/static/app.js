// The drkit page: asks POST /v1/ask and draws the answers and the reasoning chain. Plain DOM, no build step,
// nothing fetched from elsewhere. Every text from the server goes in through textContent, never as HTML. Every
// URL is relative to the page, so that it works under a reverse proxy's path prefix (drkit serve --root-path).
"use strict";

const $ = (id) => document.getElementById(id);
const WINDOW = 260; // characters of a passage shown on each side of a mention

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

const fmt = (x) => (x >= 0.001 || x === 0 ? x.toFixed(3) : x.toExponential(1));

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

// The API answers every error as JSON {"error": ..., "fields": [...]}; anything else is said as it came.
async function call(url, options) {
  let response;
  try {
    response = await fetch(url, options);
  } catch (exc) {
    throw new Error(`could not reach the server (${exc.message})`);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (exc) {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error : `HTTP ${response.status} ${response.statusText}`;
    throw new Error(`${message} (HTTP ${response.status})`);
  }
  if (body === null) throw new Error("the server's answer was not JSON");
  return body;
}

// `text` with the character ranges `spans` ([start, end], sorted) in <mark>; with `around`, only a window
// of WINDOW characters on each side of the first span.
// The server's offsets count Unicode code points; a JavaScript string counts UTF-16 units (an emoji is two),
// so the text is cut as an array of code points.
function highlighted(text, spans, around = true) {
  const chars = Array.from(text);
  const cut = (a, b) => chars.slice(a, b).join("");
  const out = el("span", { class: "text" });
  let lo = 0, hi = chars.length;
  if (around && spans.length) {
    lo = Math.max(0, spans[0][0] - WINDOW);
    hi = Math.min(chars.length, spans[spans.length - 1][1] + WINDOW);
  }
  if (lo > 0) out.append("…");
  let at = lo;
  for (const [s, e] of spans) {
    if (s < at || e > hi) continue;
    out.append(cut(at, s), el("mark", { text: cut(s, e) }));
    at = e;
  }
  out.append(cut(at, hi));
  if (hi < chars.length) out.append("…");
  return out;
}

function scoreTable(rows, cls) {
  const table = el("table", { class: cls });
  const best = Math.max(...rows.map((r) => r.score), 1e-12);
  for (const r of rows) {
    const width = Math.max(0, Math.min(100, (100 * r.score) / best));
    const bar = el("span");
    bar.style.width = `${width}%`;
    table.append(el("tr", {}, el("td", {}, r.label), el("td", { class: "num", text: fmt(r.score) }),
      el("td", { class: "bar" }, bar)));
  }
  return table;
}

async function toggleEntity(button, entityId, holder) {
  if (holder.childElementCount) {
    holder.replaceChildren();
    button.textContent = "its passages ▸";
    return;
  }
  button.disabled = true;
  try {
    const info = await call(`v1/entities/${entityId}?limit=5`);
    holder.append(el("div", { class: "muted", text:
      `${info.entity}: ${info.mentions} mention(s) in ${info.passages_mentioning} passage(s); the first ${info.passages.length}:` }));
    for (const p of info.passages) {
      const spans = p.mentions.map((m) => [m.start, m.end]);
      holder.append(el("div", { class: "passage" }, el("span", { class: "title", text: `${p.title} (passage ${p.passage_id}): ` }),
        highlighted(p.text, spans)));
    }
    button.textContent = "its passages ▾";
  } catch (exc) {
    holder.append(el("div", { class: "error", text: `could not load the passages of ${entityId}: ${exc.message}` }));
  } finally {
    button.disabled = false;
  }
}

function hopEntity(e) {
  const holder = el("div", { class: "entity-passages" });
  const expand = el("button", { class: "link expand", type: "button", text: "its passages ▸" });
  expand.addEventListener("click", () => toggleEntity(expand, e.entity_id, holder));
  const head = el("div", {}, el("span", { class: "entity-name", text: e.entity }), ` (${fmt(e.score)})`,
    e.via ? el("span", { class: "via", text: ` via ${e.via}` }) : null, " · ", expand);
  const node = el("div", { class: "hop-entity" }, head);
  if (e.evidence) {
    const ev = e.evidence;
    node.append(el("div", { class: "passage" }, el("span", { class: "title", text: `${ev.title} (passage ${ev.passage_id}): ` }),
      highlighted(ev.text, [[ev.start, ev.end]])));
  } else {
    node.append(el("div", { class: "passage muted", text: "no supporting mention in this hop" }));
  }
  node.append(holder);
  return node;
}

// `text` with the `sentences` ([start, end] code-point offsets) in <mark> and the `answer` span (or null) in <strong>,
// which may lie inside a marked sentence: the text is cut at every boundary and each piece wrapped as it falls.
function markedText(text, sentences, answer) {
  const chars = Array.from(text);
  const spans = answer ? [...sentences, answer] : sentences;
  const cuts = [...new Set([0, chars.length, ...spans.flat()])].filter((x) => x >= 0 && x <= chars.length).sort((a, b) => a - b);
  const out = el("span", { class: "text" });
  for (let i = 0; i + 1 < cuts.length; i++) {
    const [a, b] = [cuts[i], cuts[i + 1]];
    let node = chars.slice(a, b).join("");
    if (answer && a >= answer[0] && b <= answer[1]) node = el("strong", { class: "answer-span", text: node });
    if (sentences.some(([s, e]) => a >= s && b <= e)) node = el("mark", {}, node);
    out.append(node);
  }
  return out;
}

// The reader's answer, then each passage it read that holds the answer or a supporting sentence, the supporting
// sentences marked and the answer's span in bold.
function readingBox(reading) {
  const c = reading.comparison;
  const kind = c ? `the ${c.attribute === "country" ? "countries" : "dates"} read, compared`
    : reading.type === "span" ? "read from the passages" : "a yes/no question";
  const node = el("section", { class: "reading" },
    el("div", {}, el("span", { class: "reader-answer", text: reading.answer || "(no answer)" }),
      el("span", { class: "muted", text: c ? ` · ${kind}` : ` · ${kind}, p = ${fmt(reading.prob)}` })));
  if (reading.steps) {
    const s = reading.steps;
    node.append(el("div", { class: "steps muted", text: `read in two steps: “${s.inner}” → ${s.bridge} → “${s.outer}”` }));
  }
  if (c) {
    const what = { birth: "born", death: "died", life: "lived", date: "dated" }[c.attribute];
    node.append(el("div", { class: "comparison", text: c.values.map((v) =>
      `${v.option}${v.via ? ` (${c.relation || "via"}: ${v.via})` : ""}: ${c.attribute === "country" ? v.country
        : `${what} ${v.dates.join(" to ")}`}`).join("; ") }));
  }
  for (const p of reading.evidence) {
    const spans = reading.supporting.filter((s) => s.passage_id === p.id).map((s) => [s.start, s.end]);
    const here = reading.passage_id === p.id && reading.start !== null;
    const title = markedText(p.title, [], here && reading.in_title ? [reading.start, reading.end] : null);
    title.className = "title";
    const text = el("div", { class: "passage" }, title, ` (${p.id}): `);
    const body = markedText(p.text, spans, here && !reading.in_title ? [reading.start, reading.end] : null);
    text.append(body);
    node.append(text);
  }
  if (!reading.supporting.length) {
    node.append(el("div", { class: "muted", text: c ? "the compared sentences were not found as sentences of their passages"
      : "no sentence scored above 0.5 as evidence" }));
  }
  return node;
}

function renderResult(r) {
  const box = el("article", { class: "result" }, el("h2", { text: r.question }));
  if (r.error) {
    box.append(el("div", { class: "error", text: r.error }));
    return box;
  }
  const named = (r.question_entities || []).map((q) => q.entity).join(", ") || "none";
  box.append(el("div", { class: "question-entities", text: `question entities: ${named} (${r.found_by}); ${r.hops} hop(s)` }));
  if (r.pi) {
    box.append(el("h3", { text: "Hop weights π (how many hops the question needs)" }),
      el("div", { class: "pi" }, ...r.pi.map((p, t) => el("div", { text: `${t} hop(s): ${fmt(p)}` }))));
  }
  if (r.reading) box.append(el("h3", { text: "Answer (the reader, from the top passages)" }), readingBox(r.reading));
  box.append(el("h3", { text: r.reading ? "Entity answers (the last hop)" : "Answers" }));
  if (r.answers.length) box.append(scoreTable(r.answers.map((a) => ({ label: a.entity, score: a.score })), "answers"));
  else box.append(el("div", { class: "muted", text: "no entity reached" }));
  if (r.passages) {
    box.append(el("h3", { text: r.reading ? "Passages (those the reader took a supporting sentence from first; the retriever's scores)" : "Passages" }),
      scoreTable(r.passages.map((p) => ({ label: `${p.title} (${p.id})`, score: p.score })), "passages"));
  }
  if (r.chain) {
    box.append(el("h3", { text: "Reasoning chain" }));
    for (const hop of r.chain) {
      const title = hop.hop === 0 ? "Z₀: the entities linked in the question" : `Hop ${hop.hop}`;
      const node = el("section", { class: "hop" },
        el("div", {}, el("strong", { text: title }), el("span", { class: "muted", text: ` · ${hop.n_entities} entities reached` })));
      for (const e of hop.entities) node.append(hopEntity(e));
      box.append(node);
    }
  }
  return box;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  showError("");
  if (!question) {
    showError("type a question first");
    return;
  }
  const button = $("ask");
  button.disabled = true;
  $("status").textContent = "answering…";
  try {
    const body = await call("v1/ask", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question, top_k: Number($("top-k").value) }),
    });
    $("results").replaceChildren(...body.results.map(renderResult));
    $("status").textContent = `answered in ${body.took_ms} ms`;
  } catch (exc) {
    $("results").replaceChildren();
    $("status").textContent = "";
    showError(exc.message);
  } finally {
    button.disabled = false;
  }
}

async function loadInfo() {
  try {
    const info = await call("v1/info");
    const inputs = (info.manifests.index || {}).inputs || {};
    const corpus = inputs.corpus && inputs.corpus.path ? ` of ${inputs.corpus.path.split("/").pop()}` : "";
    const c = info.counts;
    $("model-info").textContent = `${info.kind === "passages" ? "Hop-mixing model (plain questions, 0–" + info.max_hops + " hops)"
      : info.max_hops + "-hop model"} over ${c.entities.toLocaleString()} entities, ${c.mentions.toLocaleString()} ` +
      `mentions and ${c.passages.toLocaleString()} passages${corpus}; drkit ${info.drkit_version}.`;
    if (info.kind === "passages") $("question").placeholder = "e.g. Who is the mother of the director of film Polish-Russian War?";
  } catch (exc) {
    $("model-info").textContent = "";
    showError(`could not read what the server has loaded: ${exc.message}`);
  }
}

$("ask-form").addEventListener("submit", ask);
loadInfo();
