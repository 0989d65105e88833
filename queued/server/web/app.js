// queued's live status page. Read-only: it reads GET /status, follows
// GET /changes (a long-poll that answers at the scheduler's next change)
// and tails the running jobs' output with GET /logs long-polls. The
// token comes from the URL fragment (#token=..., the address
// `tt-device-queue web` prints), which never reaches the server, or is
// got once for the one-time code in it (#code=..., the address `web
// --open` starts a browser on, whose command line every local user can
// read) at POST /page/session; it is kept in sessionStorage and sent as
// the bearer token.
"use strict";

const TOKEN_KEY = "queued-token";
const CHANGES_WAIT = 10;    // seconds; holders outside the queue are rescanned at least this often
const LOG_WAIT = 25;        // seconds a /logs long-poll waits for output
const TAIL_BYTES = 4096;    // how much of a running job's output is shown
const MAX_TAILS = 4;        // live tails at once; a browser opens about 6 connections per host

const $ = (id) => document.getElementById(id);
let token = "";
let lastStatus = null;
const tails = new Map();    // job id -> {text, done}

async function takeToken() {
  const m = /^#(token|code)=([A-Za-z0-9._~%-]+)$/.exec(location.hash);
  if (m) {
    history.replaceState(null, "", location.pathname);
    const value = decodeURIComponent(m[2]);
    if (m[1] === "token") {
      sessionStorage.setItem(TOKEN_KEY, value);
    } else {
      sessionStorage.setItem(TOKEN_KEY, await exchangeCode(value));
    }
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

// exchangeCode trades the one-time code for the page's token; the code
// is dead afterwards, so a reload finds the token in sessionStorage.
async function exchangeCode(code) {
  const r = await fetch("/page/session", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({code: code}), cache: "no-store", credentials: "omit"});
  let b = {};
  try { b = await r.json(); } catch (_) { /* not JSON */ }
  if (!r.ok || !b.token) throw new Error(b.error || (r.status + " " + r.statusText));
  return b.token;
}

class HTTPError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

// api fetches path with the token; GET /logs asks for the raw output
// bytes, not the JSON answer other clients get by default.
async function api(path) {
  const headers = {"Authorization": "Bearer " + token};
  if (path.startsWith("/logs/")) headers["Accept"] = "application/octet-stream";
  const r = await fetch(path, {headers: headers, cache: "no-store", credentials: "omit"});
  if (!r.ok) {
    let msg = r.status + " " + r.statusText;
    try { const b = await r.json(); if (b.error) msg = b.error; } catch (_) { /* not JSON */ }
    throw new HTTPError(r.status, msg);
  }
  return r;
}

function sleep(ms) { return new Promise((res) => setTimeout(res, ms)); }

function notice(text, bad) {
  const n = $("notice");
  n.hidden = !text;
  n.textContent = text || "";
  n.className = bad ? "notice bad" : "notice";
}

function setConn(text, live) {
  const c = $("conn");
  c.textContent = text;
  c.className = "conn " + (live ? "live" : "down");
}

// BIDI are the bidirectional-text controls: in another user's command
// they reorder what the page shows, so it reads other than what runs.
const BIDI = /[\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

// visible is text with its bidirectional-text controls shown as escapes
// (\u202e), as the CLI prints them.
function visible(text) {
  return String(text).replace(BIDI, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

// el builds an element; text is set with textContent, never parsed.
function el(tag, cls, text, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = visible(text);
  for (const k of kids) if (k) e.appendChild(k);
  return e;
}

function dur(sec) {
  if (sec === undefined || sec === null || !isFinite(sec)) return "–";
  sec = Math.max(0, Math.round(sec));
  const h = Math.floor(sec / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
  if (h) return h + "h " + String(m).padStart(2, "0") + "m";
  if (m) return m + "m " + String(s).padStart(2, "0") + "s";
  return s + "s";
}

function since(iso) { return (Date.now() - Date.parse(iso)) / 1000; }
function when(iso) { return new Date(iso).toLocaleString(); }
function short(id) { return id ? id.slice(0, 8) : ""; }

// owner names whose a job is: its owner's user name (or uid), which a
// system-mode queued records, else the client id it was submitted under
// (on a user-mode queued every job is its one user's), or "" when neither
// is known.
function owner(j) {
  if (j.owner) return j.owner;
  if (j.owner_uid !== undefined && j.owner_uid !== null) return "uid " + j.owner_uid;
  return j.client_id || "";
}

function kv(pairs) {
  const dl = el("dl", "kv");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    dl.appendChild(el("dt", null, k));
    const dd = el("dd");
    if (v instanceof Node) dd.appendChild(v); else dd.textContent = visible(v);
    dl.appendChild(dd);
  }
  return dl;
}

function renderSummary(st) {
  const s = $("summary");
  s.replaceChildren();
  const store = st.persistence.ok
    ? el("span", "ok", "store ok")
    : el("span", "bad", "store failing since " + (st.persistence.since ? when(st.persistence.since) : "?") + ": " + (st.persistence.error || ""));
  store.id = "store";
  s.append(el("span", null, st.queued + " queued of at most " + st.max_queued), store);
  if (st.stopping) s.append(el("span", "bad", "queued is stopping"));
  if (st.version) s.append(el("span", null, "queued " + st.version));
  if (st.mode === "system") s.append(el("span", null, "shared by every user of the host (system mode)"));
  for (const w of st.warnings || []) s.append(el("span", "bad", w));
}

function renderCard(c) {
  const card = el("article", "card " + c.state);
  card.id = "card-" + c.device_id;
  card.dataset.device = c.device_id;
  card.appendChild(el("h2", null, "Card " + c.device_id,
    el("span", "badge " + c.state, c.state), el("span", "worker", c.worker)));
  if (c.waiting_since) {
    // Idle for a job of several cards that waits for the others.
    card.appendChild(el("p", "waiting", "idle " + dur(since(c.waiting_since)) + " so far"));
  }
  if (c.card_type || c.pci_address) {
    card.appendChild(el("p", "board", [c.card_type, c.serial, c.asic_id ? "ASIC " + c.asic_id : "", c.pci_address ? "PCI " + c.pci_address : ""].filter(Boolean).join(" · ")));
  }
  for (const x of c.cross_card || []) card.appendChild(el("p", "bad", x));

  if (c.state === "dead") {
    card.appendChild(el("p", "dead-reason", "Dead: " + (c.dead_reason || "no reason recorded") +
      (c.dead_since ? " (since " + when(c.dead_since) + ")" : "")));
  }
  if (c.state === "unfit") {
    // The fitness gate holds the card's jobs: they stay queued.
    card.appendChild(el("p", "unfit-reason", "Unfit: " + (c.reason || "no reason recorded") +
      (c.unfit_since ? " (since " + when(c.unfit_since) + ")" : "") + "; its jobs stay queued until the gate passes"));
  }
  if (c.rung) {
    // The recovery ladder's rung running now; each is verified by the
    // health check and the gate.
    card.appendChild(el("p", "rung", "Recovery ladder: " + c.rung));
  }
  if (c.recovery) {
    // Why the recovery does not go on: someone else's process holds the
    // card, or the automatic ladders reached their bound per hour.
    card.appendChild(el("p", "recovery-note", c.recovery));
  }

  card.appendChild(el("h3", null, "Running"));
  const cur = c.current;
  if (cur) {
    const runtime = el("span", "runtime");
    runtime.dataset.started = cur.started_at || "";
    runtime.textContent = cur.started_at ? dur(since(cur.started_at)) : "starting";
    card.appendChild(kv([
      ["command", el("code", "cmd", cur.cmd)],
      ["job", short(cur.id) + (cur.kind === "reset" ? " (reset)" : cur.kind === "hold" ? " (hold)" : "") +
        (cur.devices && cur.devices.length > 1 ? " on cards " + cur.devices.join(",") : "")],
      ["owner", cur.kind === "reset" ? "" : owner(cur)],
      ["client", cur.client_id && cur.client_id !== owner(cur) ? cur.client_id : ""],
      ["agent", cur.agent ? cur.agent + " (queued through tt-device-queue mcp)" : ""],
      ["runtime", runtime],
      ["estimate", cur.estimated_run_sec ? dur(cur.estimated_run_sec) + " in all, about " + dur(cur.estimated_wait_sec) + " left" : "no history yet"],
      ["pid", cur.pid ? String(cur.pid) : ""],
      ["attempt", cur.attempt ? cur.attempt + "/" + (cur.retries + 1) : ""],
    ]));
    const pre = el("pre", "tail", (tails.get(cur.id) || {}).text || "");
    pre.id = "tail-" + cur.id;
    pre.dataset.job = cur.id;
    card.appendChild(pre);
  } else {
    card.appendChild(el("p", "empty", "nothing running"));
  }

  card.appendChild(el("h3", null, "Queue (" + (c.pending || []).length + "), a new job waits about " + dur(c.estimated_wait_sec)));
  if (c.pending && c.pending.length) {
    const ol = el("ol", "queue");
    for (const j of c.pending) {
      const who = j.kind === "reset" ? "" : owner(j) + (j.agent ? " (agent: " + j.agent + ")" : "");
      const cards = (j.devices && j.devices.length > 1 ? " (cards " + j.devices.join(",") + ")" : "") +
        (j.attempt > 1 ? " (attempt " + j.attempt + "/" + (j.retries + 1) + ")" : "") +
        (j.waits_for && j.waits_for.length ? " (after " + j.waits_for.map(short).join(",") + ")" : "");
      const li = el("li", null, null, el("span", "pos", "#" + j.position),
        el("code", "cmd", j.cmd + cards), el("span", "owner", who), el("span", "wait", "~" + dur(j.estimated_wait_sec)));
      li.dataset.job = j.id;
      li.title = short(j.id) + (j.kind === "reset" ? " (reset)" : (who ? " by " + who : "")) +
        (j.client_id && j.client_id !== who ? " (client " + j.client_id + ")" : "");
      ol.appendChild(li);
    }
    card.appendChild(ol);
  } else {
    card.appendChild(el("p", "empty", "empty"));
  }

  if (c.reset || c.last_reset) {
    card.appendChild(el("h3", null, "Reset"));
    const pairs = [];
    if (c.reset) pairs.push(["pending", c.reset.state + " since " + when(c.reset.at)]);
    if (c.last_reset) {
      const r = c.last_reset;
      pairs.push(["last", el("span", "result-" + r.result, r.result + " at " + when(r.at) + (r.detail ? ": " + r.detail : ""))]);
    }
    card.appendChild(kv(pairs));
  }

  if ((c.foreign && c.foreign.length) || c.foreign_error) {
    card.appendChild(el("h3", null, "Held outside the queue"));
    const ul = el("ul", "foreign");
    for (const h of c.foreign || []) {
      ul.appendChild(el("li", null, "pid " + h.pid + " " + (h.friendly_name || "") +
        (h.command_line ? " (" + h.command_line + ")" : "") + (h.job_id ? " job " + short(h.job_id) : "")));
    }
    if (c.foreign_error) ul.appendChild(el("li", null, "list may be incomplete: " + c.foreign_error));
    card.appendChild(ul);
  }
  return card;
}

function render(st) {
  lastStatus = st;
  renderSummary(st);
  $("cards").replaceChildren(...st.cards.map(renderCard));
  startTails(st);
}

// tick updates the runtimes each second without asking the server.
function tick() {
  for (const r of document.querySelectorAll(".runtime")) {
    if (r.dataset.started) r.textContent = dur(since(r.dataset.started));
  }
}

function running(st) {
  return st.cards.map((c) => c.current).filter((j) => j).map((j) => j.id);
}

function startTails(st) {
  const ids = running(st);
  for (const id of tails.keys()) if (!ids.includes(id)) tails.delete(id);
  for (const id of ids) {
    if (tails.has(id) || tails.size >= MAX_TAILS) continue;
    tails.set(id, {text: ""});
    tail(id);
  }
}

function showTail(id, text) {
  const t = tails.get(id);
  if (!t) return;
  t.text = text;
  const pre = document.getElementById("tail-" + id);
  if (pre) {
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = visible(text);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }
}

// tail follows a running job's output from its last TAIL_BYTES until the
// job is over or no longer shown.
async function tail(id) {
  const dec = new TextDecoder();
  let offset = 0, text = "";
  try {
    const first = await api("/logs/" + id + "?offset=0&limit=1");
    await first.arrayBuffer();
    offset = Math.max(0, Number(first.headers.get("X-Log-Size")) - TAIL_BYTES);
    while (tails.has(id)) {
      const r = await api("/logs/" + id + "?offset=" + offset + "&limit=65536&wait=" + LOG_WAIT);
      const buf = await r.arrayBuffer();
      text = (text + dec.decode(buf, {stream: true})).slice(-TAIL_BYTES);
      offset = Number(r.headers.get("X-Log-Next-Offset"));
      showTail(id, text);
      if (r.headers.get("X-Log-Done") === "true") break;
    }
  } catch (e) {
    if (tails.has(id)) showTail(id, text + "\n[output unavailable: " + e.message + "]");
  }
}

async function follow() {
  let gen = null, failures = 0;
  for (;;) {
    try {
      const q = gen === null ? "" : "?since=" + gen + "&wait=" + CHANGES_WAIT;
      gen = (await (await api("/changes" + q)).json()).gen;
      const st = await (await api("/status")).json();
      render(st);
      failures = 0;
      notice("");
      setConn("live, updated " + new Date().toLocaleTimeString(), true);
    } catch (e) {
      if (e instanceof HTTPError && e.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        notice("The token was refused (queued restarted with a new one?). Open the address that `tt-device-queue web` prints.", true);
        setConn("not signed in", false);
        return;
      }
      failures++;
      gen = null;
      setConn("disconnected: " + e.message + "; retrying", false);
      await sleep(Math.min(10000, 500 * failures));
    }
  }
}

async function main() {
  try {
    token = await takeToken();
  } catch (e) {
    notice("The one-time code was refused (" + e.message + "). Run `tt-device-queue web --open` again, or open the address it prints.", true);
    setConn("not signed in", false);
    return;
  }
  if (!token) {
    notice("No token: open the address that `tt-device-queue web` prints (it carries the token after #).", true);
    setConn("not signed in", false);
    return;
  }
  setInterval(tick, 1000);
  follow();
}

main();
