// Switchboard console: streams results over the WebSocket API (resuming
// with the last cursor after a drop), counts them by outcome, sends intents
// (following each one's progress live over Server-Sent Events) and shows one
// intent's timeline. Plain JavaScript, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { cursor: "", subs: [], ws: null, counts: {}, retry: 0, types: new Set() };

function text(el, s) { el.textContent = s; return el; }
function setStatus(s) { const el = $("status"); el.dataset.state = s; text(el, s); }

// The credential (an API key or a JWT) the user entered, kept for this tab
// only. Without one the console works against an API with authentication off
// (switchboard dev).
function token() { return sessionStorage.getItem("switchboard.token") || ""; }

async function api(method, path, body, headers) {
  const auth = token() ? { Authorization: "Bearer " + token() } : {};
  const init = { method, headers: Object.assign({ "Content-Type": "application/json" }, auth, headers || {}) };
  if (body !== undefined) init.body = body;
  const resp = await fetch(path, init);
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) {
    const err = (data && data.error) || { code: "http_" + resp.status, message: resp.statusText };
    throw Object.assign(new Error(err.message), err);
  }
  return data;
}

// --- the stream ---

function wsURL() {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/stream";
}

function connect() {
  // Browsers cannot set headers on a WebSocket: the token goes in the
  // subprotocol list, never in the URL.
  const ws = token() ? new WebSocket(wsURL(), ["switchboard.v1", "bearer." + token()]) : new WebSocket(wsURL());
  state.ws = ws;
  ws.onopen = () => {
    state.retry = 0;
    if (state.cursor && state.subs.length) {
      setStatus("replaying");
      ws.send(JSON.stringify({ resume: { cursor: state.cursor, subscriptions: state.subs } }));
    } else {
      setStatus("live");
      state.subs.forEach((s) => ws.send(JSON.stringify({ subscribe: s })));
    }
  };
  ws.onmessage = (ev) => onMessage(JSON.parse(ev.data));
  ws.onclose = () => {
    setStatus("reconnecting");
    state.retry = Math.min(state.retry + 1, 5);
    setTimeout(connect, 250 * 2 ** state.retry);
  };
}

function subscribe(sub) {
  const key = JSON.stringify(sub);
  if (state.subs.some((s) => JSON.stringify(s) === key)) return;
  state.subs.push(sub);
  if (state.ws && state.ws.readyState === WebSocket.OPEN) {
    state.ws.send(JSON.stringify({ subscribe: sub }));
  }
}

function subscribeType(t) {
  if (!t || state.types.has(t)) return;
  state.types.add(t);
  subscribe({ intent_type: t });
}

function onMessage(m) {
  if (m.cursor) { state.cursor = m.cursor; text($("cursor"), m.cursor); }
  switch (m.type) {
    case "result": addResult(m.result); break;
    case "timeout": addTimeout(m.timeout); break;
    case "resumed": setStatus("live"); break;
    case "error":
      if (m.error.code === "cursor_expired") { // accept the gap: resume from what is left
        state.ws.send(JSON.stringify({ resume: { cursor: m.error.earliest, subscriptions: state.subs } }));
      } else if (m.error.code === "resume_unavailable" || m.error.code === "bad_cursor") {
        state.cursor = "";
        setStatus("live");
        state.subs.forEach((s) => state.ws.send(JSON.stringify({ subscribe: s })));
      } else {
        console.warn("stream error", m.error);
      }
      break;
  }
}

function addResult(r) {
  state.counts[r.outcome] = (state.counts[r.outcome] || 0) + 1;
  renderCounters();
  const tr = document.createElement("tr");
  tr.dataset.intentId = r.intent_id;
  tr.dataset.outcome = r.outcome;
  const took = r.timeline ? (r.timeline.resolved_at - r.timeline.received_at) + " ms" : "";
  [r.intent_id, r.intent_type, r.agent, r.outcome, took].forEach((v, i) => {
    const td = text(document.createElement("td"), v || "");
    if (i === 0) {
      td.className = "id";
      td.title = "show the timeline";
      td.style.cursor = "pointer";
      td.onclick = () => { $("search-input").value = r.intent_id; showIntent(r.intent_id); };
    }
    tr.appendChild(td);
  });
  const tbody = $("results");
  tbody.insertBefore(tr, tbody.firstChild);
  while (tbody.children.length > 500) tbody.removeChild(tbody.lastChild);
}

function addTimeout(t) {
  state.counts["timeout events"] = (state.counts["timeout events"] || 0) + 1;
  renderCounters();
}

function renderCounters() {
  const ul = $("counters");
  ul.replaceChildren(...Object.keys(state.counts).sort().map((k) => {
    const li = text(document.createElement("li"), k + ": ");
    li.dataset.outcome = k;
    const b = text(document.createElement("b"), String(state.counts[k]));
    b.className = "count";
    li.appendChild(b);
    return li;
  }));
}

// --- sending and searching ---

async function send(ev) {
  ev.preventDefault();
  const out = $("sent");
  out.className = "";
  const type = $("intent-type").value.trim();
  let payload;
  try { payload = JSON.parse($("payload").value || "null"); } catch (e) {
    out.className = "error"; text(out, "payload is not JSON: " + e.message); return;
  }
  const body = { intent_type: type, payload };
  const session = $("session-id").value.trim();
  if (session) body.session_id = session;
  subscribeType(type);
  try {
    await follow(JSON.stringify(body), (accepted) => {
      out.dataset.intentId = accepted.intent_id;
      text(out, "sent " + accepted.intent_id);
    });
  } catch (e) {
    out.className = "error";
    text(out, e.code + ": " + e.message + (e.field ? " (" + e.field + ")" : ""));
  }
}

// --- following one intent: POST /v1/intents?stream=sse ---

// follow publishes an intent and reads its event stream (fetch, not
// EventSource, which cannot send the Authorization header): accepted, then
// progress events, which the running panel shows as they come (a partial
// {"text": ...} grows in place), then the result.
async function follow(body, onAccepted) {
  const auth = token() ? { Authorization: "Bearer " + token() } : {};
  const resp = await fetch("/v1/intents?stream=sse", {
    method: "POST", body, headers: Object.assign({ "Content-Type": "application/json", Accept: "text/event-stream" }, auth),
  });
  if (!resp.ok) {
    let data = null;
    try { data = await resp.json(); } catch (e) { /* not JSON */ }
    const err = (data && data.error) || { code: "http_" + resp.status, message: resp.statusText };
    throw Object.assign(new Error(err.message), err);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "", card = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = "", data = "";
      block.split("\n").forEach((line) => {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      });
      if (!event || !data) continue; // a comment (keepalive)
      const v = JSON.parse(data);
      if (event === "accepted") { onAccepted(v); card = runningCard(v.intent_id); }
      else if (event === "progress" && card) showProgress(card, v);
      else if (event === "result" && card) showDone(card, v);
      else if (event === "error" && card) { card.dataset.state = "error"; text(card.querySelector(".message"), v.code + ": " + v.message); }
    }
  }
}

function runningCard(id) {
  const card = document.createElement("div");
  card.className = "running";
  card.dataset.intentId = id;
  card.dataset.state = "running";
  const head = text(document.createElement("div"), id);
  head.className = "id";
  const bar = document.createElement("progress");
  bar.max = 1;
  const message = document.createElement("span");
  message.className = "message";
  const partial = document.createElement("pre");
  partial.className = "partial";
  card.append(head, bar, message, partial);
  const box = $("running");
  box.insertBefore(card, box.firstChild);
  while (box.children.length > 20) box.removeChild(box.lastChild);
  return card;
}

function showProgress(card, p) {
  card.dataset.sequence = p.sequence;
  const bar = card.querySelector("progress");
  if (typeof p.progress === "number") {
    bar.max = typeof p.total === "number" && p.total > 0 ? p.total : 1;
    bar.value = p.progress;
  }
  if (p.message) text(card.querySelector(".message"), p.message);
  if (p.partial === undefined) return;
  const pre = card.querySelector(".partial");
  if (p.partial && typeof p.partial.text === "string") {
    pre.textContent += p.partial.text; // a text delta: the answer grows in place
  } else {
    pre.textContent = JSON.stringify(p.partial);
  }
}

function showDone(card, r) {
  card.dataset.state = "done";
  card.dataset.outcome = r.outcome;
  text(card.querySelector(".message"), r.outcome);
  const bar = card.querySelector("progress");
  bar.max = 1;
  bar.value = 1;
}

async function showIntent(id) {
  const box = $("detail");
  box.replaceChildren();
  try {
    const v = await api("GET", "/v1/intents/" + encodeURIComponent(id));
    const h = text(document.createElement("p"), v.intent_id + ": " + v.status + (v.outcome ? " (" + v.outcome + ")" : ""));
    h.id = "detail-status";
    const ol = document.createElement("ol");
    ol.id = "timeline";
    (v.events || []).forEach((e) => {
      const li = text(document.createElement("li"),
        e.event + " at " + new Date(e.at).toISOString() + (e.detail ? " — " + e.detail : "") + (e.outcome ? " — " + e.outcome : ""));
      li.dataset.event = e.event;
      ol.appendChild(li);
    });
    box.append(h, ol);
    if (v.answer !== undefined) {
      box.appendChild(text(document.createElement("pre"), JSON.stringify(v.answer, null, 2)));
    }
  } catch (e) {
    box.appendChild(Object.assign(text(document.createElement("p"), e.code + ": " + e.message), { className: "error", id: "detail-status" }));
  }
}

async function start() {
  $("send-form").addEventListener("submit", send);
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); showIntent($("search-input").value.trim()); });
  try {
    const v = await api("GET", "/v1/intent-types");
    const dl = $("intent-types");
    v.intent_types.forEach((t) => {
      const o = document.createElement("option");
      o.value = t.name;
      dl.appendChild(o);
      subscribeType(t.name);
    });
    if (v.intent_types.length && !$("intent-type").value) $("intent-type").value = v.intent_types[0].name;
  } catch (e) {
    console.warn("intent types", e);
  }
  connect();
}

start();

// --- the credential ---

(function credential() {
  const form = $("token-form");
  if (!form) return;
  $("token").value = token();
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem("switchboard.token", $("token").value.trim());
    location.reload();
  });
})();
