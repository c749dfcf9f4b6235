// hyperhive dashboard: live fragments over SSE, forms and buttons over the JSON API.
// Plain JS, no network but this dashboard, no polling: the server pushes events.
"use strict";

function cookie(name) {
  const hit = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
  return hit ? decodeURIComponent(hit.slice(name.length + 1)) : "";
}

async function api(method, url, body) {
  const headers = { "X-CSRF-Token": cookie("hive_csrf"), Accept: "application/json" };
  let payload;
  if (body instanceof URLSearchParams) {
    payload = body;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const resp = await fetch(url, { method, headers, body: payload, credentials: "same-origin" });
  let data = null;
  try { data = await resp.json(); } catch (_) { data = null; }
  if (!resp.ok) {
    let message = `HTTP ${resp.status}`;
    if (data && data.error && data.error.message) message = data.error.message;
    else if (data && Array.isArray(data.detail)) {
      message = data.detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
    }
    const err = new Error(message);
    err.status = resp.status;
    throw err;
  }
  return data;
}

function show(out, text, refused) {
  // The local output, and the page's flash line (which survives a fragment repaint).
  for (const el of [out, text === "…" ? null : document.getElementById("flash")]) {
    if (!el) continue;
    el.textContent = text;
    el.classList.toggle("refused", !!refused);
    el.classList.toggle("ok", !refused);
  }
}

function repaint(el) {
  const box = el.closest("[data-src][data-on]");
  if (box) schedule(box);
}

function summary(verb, data) {
  if (!data || typeof data !== "object") return verb;
  if ("approval_id" in data && data.state === "pending") {
    return `approval #${data.approval_id} created — approve it under Approvals`;
  }
  if ("changed" in data) return data.changed ? "moved" : "already there (nothing changed)";
  if (data.queued) {
    const used = data.context_usage == null ? "usage unknown" : `${Math.round(data.context_usage * 100)}% used`;
    return `compaction queued (${used}): ${data.note}`;
  }
  if ("id" in data && "to" in data) return `sent #${data.id} to ${data.to}`;
  if (data.message_id) return `answered; sent to ${data.asker} as #${data.message_id}`;
  if (data.destroyed) return `destroyed; data moved to ${data.data_moved_to}`;
  if (data.state) return `#${data.approval_id} ${data.state}`;
  if (Array.isArray(data.scopes)) return verb;
  return `${verb}: ${JSON.stringify(data)}`;
}

// ---- forms with data-api and buttons with data-post ---------------------------------

document.addEventListener("submit", async (ev) => {
  const form = ev.target.closest("form[data-api]");
  if (!form) return;
  ev.preventDefault();
  const out = form.querySelector("output.result");
  const fields = new FormData(form);
  let body;
  if (form.dataset.encoding === "form") {
    body = new URLSearchParams(fields);
  } else {
    body = {};
    for (const [k, v] of fields.entries()) body[k] = v;
  }
  show(out, "…", false);
  try {
    const data = await api("POST", form.dataset.api, body);
    show(out, summary(form.dataset.ok || "done", data), false);
    form.querySelectorAll("input:not([type=hidden])").forEach((i) => { if (i.type !== "checkbox") i.value = ""; });
    repaint(form);
  } catch (err) {
    show(out, err.message, true);
  }
});

document.addEventListener("click", async (ev) => {
  const button = ev.target.closest("button[data-post]");
  if (!button) return;
  ev.preventDefault();
  if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
  const out = document.getElementById("action-result") || button.parentElement.querySelector("output");
  const body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
  show(out, "…", false);
  try {
    const data = await api("POST", button.dataset.post, body);
    show(out, summary(button.textContent.trim().toLowerCase(), data), false);
    repaint(button);
  } catch (err) {
    show(out, err.message, true);
  }
});

// ---- "since" clocks (local, no network) ----------------------------------------------

function ago(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

function tick() {
  const now = Date.now() / 1000;
  document.querySelectorAll("[data-since]").forEach((el) => {
    el.textContent = `for ${ago(now - parseFloat(el.dataset.since))}`;
  });
  document.querySelectorAll("time[data-at]").forEach((el) => {
    el.textContent = new Date(parseFloat(el.dataset.at) * 1000).toLocaleString();
  });
}

// ---- live fragments -------------------------------------------------------------------

const pending = new Map();
// The element a pointer is pressed on, if any. A click is a press and a release on the
// same element: a repaint between the two would swallow it (a human's click spans
// ~100 ms, so a refresh landing in between is no rare race).
let pressed = null;

function busy(box) {
  if (pressed && box.contains(pressed)) return true;
  // Never swap the field the operator is typing in: focus, caret and an IME's
  // composition would not survive it. Typed text elsewhere in the part is carried over.
  const active = document.activeElement;
  return Boolean(active && box.contains(active) && active.value);
}

function fieldKey(el) {
  const form = el.closest("form[data-api]");
  return form && el.name ? `${form.dataset.api}\u0000${el.name}` : null;
}

function typedFields(box) {
  // What the operator typed and has not sent, by form and field: a repaint keeps it.
  const typed = new Map();
  box.querySelectorAll("input:not([type=hidden]):not([type=checkbox]):not([type=radio]), textarea").forEach((el) => {
    const key = fieldKey(el);
    if (key && el.value !== el.defaultValue) typed.set(key, el.value);
  });
  return typed;
}

function restoreFields(box, typed) {
  if (!typed.size) return;
  box.querySelectorAll("input, textarea").forEach((el) => {
    const key = fieldKey(el);
    if (key && typed.has(key)) el.value = typed.get(key);
  });
}

async function refresh(box) {
  // Checked again when the answer is in, since the operator may have started typing
  // or pressing while it was on its way; the part refreshes on focusout and release.
  if (busy(box)) { box.dataset.stale = "1"; return; }
  const resp = await fetch(box.dataset.src, { headers: { Accept: "text/html" } });
  if (resp.ok) {
    const html = await resp.text();
    if (busy(box)) { box.dataset.stale = "1"; return; }
    const typed = typedFields(box);
    box.innerHTML = html;
    restoreFields(box, typed);
    delete box.dataset.stale;
    box.dispatchEvent(new CustomEvent("hive:refreshed", { bubbles: true }));
    tick();
  }
}

const lastRefresh = new Map();

function schedule(box) {
  if (pending.has(box)) return;
  // A part with data-every repaints at most once per that many milliseconds: the
  // timeline of a busy hive would otherwise repaint on every turn's start and end.
  const every = Number(box.dataset.every) || 0;
  const wait = Math.max(30, (lastRefresh.get(box) || 0) + every - Date.now());
  pending.set(box, setTimeout(() => {
    pending.delete(box);
    lastRefresh.set(box, Date.now());
    refresh(box);
  }, wait));
}

function connectHive() {
  const boxes = [...document.querySelectorAll("[data-on][data-src]")];
  const dot = document.getElementById("live-dot");
  const source = new EventSource("/api/events");
  const kinds = new Set(boxes.flatMap((b) => b.dataset.on.split(" ")));
  source.addEventListener("hello", async () => {
    if (dot) dot.classList.add("on");
    // (Re)connected: whatever changed while no stream was open (since the page was
    // rendered, or while it was away) is fetched once, by every live part. The page is
    // live (data-live) once that is in: from then on it shows all and misses nothing.
    await Promise.allSettled(boxes.map(refresh));
    document.body.dataset.live = "1";
  });
  for (const kind of kinds) {
    source.addEventListener(kind, () => {
      boxes.filter((b) => b.dataset.on.split(" ").includes(kind)).forEach(schedule);
    });
  }
  source.onerror = () => {
    if (dot) dot.classList.remove("on");
    delete document.body.dataset.live;
  };
  const catchUp = () => boxes.filter((b) => b.dataset.stale).forEach(schedule);
  document.addEventListener("focusout", catchUp);
  document.addEventListener("pointerdown", (ev) => { pressed = ev.target; }, true);
  for (const kind of ["pointerup", "pointercancel"]) {
    // Capture phase, before the click this release makes: schedule()'s timer runs after it.
    document.addEventListener(kind, () => { pressed = null; catchUp(); }, true);
  }
  window.addEventListener("blur", () => { pressed = null; catchUp(); });
}

// ---- the agent page's turn stream -------------------------------------------------------

function streamLine(list, cls, text) {
  const li = document.createElement("li");
  li.className = cls;
  li.textContent = text;
  list.appendChild(li);
  while (list.children.length > 400) list.removeChild(list.firstChild);
  list.scrollTop = list.scrollHeight;
}

function setTurn(state, since) {
  const el = document.getElementById("turn-state");
  if (!el) return;
  el.className = `turn turn-${state}`;
  el.dataset.turn = state;
  el.textContent = state + " ";
  const s = document.createElement("span");
  s.className = "since";
  s.dataset.since = since;
  el.appendChild(s);
  tick();
}

function connectAgent() {
  const list = document.getElementById("stream");
  if (!list) return;
  const source = new EventSource(list.dataset.src);
  const on = (kind, fn) => source.addEventListener(kind, (ev) => fn(JSON.parse(ev.data)));
  on("state", (e) => { setTurn(e.turn_state, e.since); streamLine(list, "state", `· ${e.turn_state}`); });
  on("turn_start", (e) => streamLine(list, "turn-start", `▶ turn: ${e.prompt || ""}`));
  on("init", (e) => streamLine(list, "init", `session ${e.session_id || ""} (${(e.tools || []).length} tools)`));
  on("text", (e) => streamLine(list, "text", e.text));
  on("tool_use", (e) => streamLine(list, "tool-use", `→ ${e.name} ${JSON.stringify(e.input)}`));
  on("tool_result", (e) => streamLine(list, e.is_error ? "tool-result error" : "tool-result", `← ${e.text}`));
  on("turn_end", (e) => streamLine(list, "turn-end", `■ turn ended: ${e.outcome || ""}`));
  on("offline", (e) => streamLine(list, "offline", `(not streaming: ${e.message})`));
  source.addEventListener("open", () => { document.getElementById("stream-state").textContent = "live"; });
}

// ---- the permissions tab ------------------------------------------------------------------

function connectPerms() {
  const form = document.getElementById("perms");
  if (!form) return;
  const agent = form.dataset.agent;
  const out = document.getElementById("perms-result");
  const picked = (name) => [...form.querySelectorAll(`input[name=${name}]:checked`)].map((i) => i.value);
  form.addEventListener("change", async () => {
    const q = new URLSearchParams({ groups: picked("group").join(","), caps: picked("cap").join(",") });
    try {
      const data = await api("GET", `/api/agents/${agent}/perms/preview?${q}`);
      document.getElementById("tools-arg").textContent = data.tools_arg;
      document.getElementById("allowed-tools-arg").textContent = data.allowed_tools_arg;
      out.textContent = "not saved yet";
      out.className = "result";
    } catch (err) {
      show(out, err.message, true);
    }
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try {
      const data = await api("POST", `/api/agents/${agent}/perms`, {
        tool_groups: picked("group"), capabilities: picked("cap"),
      });
      show(out, summary("saved", data), false);
    } catch (err) {
      show(out, err.message, true);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  tick();
  setInterval(tick, 1000);
  connectHive();
  connectAgent();
  connectPerms();
});
