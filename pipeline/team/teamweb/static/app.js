// Foreman's team page: renders GET api/status, follows api/stream (server-sent
// events) and re-reads the status when something happens; the action buttons
// POST api/resolve. Every request but the page's own files carries the token.
// No framework, no other origin.
"use strict";

(() => {
  const STATES = ["pending", "running", "merged", "paused", "skipped", "abandoned", "blocked"];
  const NODE_W = 190, NODE_H = 58, GAP_X = 56, GAP_Y = 16, PAD = 8;
  const SVG = "http://www.w3.org/2000/svg";
  const MAX_EVENTS = 200;
  // A plan larger than GRAPH_MAX stories (the server's own threshold for a
  // summary graph) has its graph drawn for the stories that need a look
  // (running, paused, blocked, the first GRAPH_MAX of them) and its table
  // drawn FIRST_ROWS rows at once and the rest ROWS_PER_STEP a frame, so
  // that the page paints at once however long the plan.
  const GRAPH_MAX = 200, FIRST_ROWS = 300, ROWS_PER_STEP = 1500;
  // What a story's agents tried and were refused is theirs to word (file
  // names, commands, URLs): it is shown as text only, never as markup, and
  // each detail at most MAX_REFUSAL characters (the server bounds it too).
  const MAX_REFUSAL = 300;
  let renderGen = 0;      // a newer render stops an older one's rows
  const openRefusals = new Set(); // stories whose refusals a person opened

  const $ = (sel) => document.querySelector(sel);
  let status = null;      // the last status read
  let clockSkew = 0;      // server time - local time, in ms
  let lastSeq = 0;        // the last event seen (the stream's position)
  let source = null;      // the EventSource
  let fetching = false, stale = false;

  // The token arrives in the URL's fragment (never sent to a server) and is
  // kept for this tab only.
  function initToken() {
    const m = /(?:^|[#&])token=([^&]*)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem("foreman-token", decodeURIComponent(m[1]));
      history.replaceState(null, "", location.pathname + location.search);
    }
    const input = $("#token");
    input.value = sessionStorage.getItem("foreman-token") || "";
    input.addEventListener("change", () => {
      sessionStorage.setItem("foreman-token", input.value.trim());
      // Read again with the new token, and follow the stream with it.
      if (source) { source.close(); source = null; }
      refresh();
    });
  }
  const token = () => ($("#token").value || "").trim();
  const authed = () => ({ "X-Foreman-Token": token() });

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c ?? "")));
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const stateBadge = (s) => el("span", { class: "state " + s }, s);
  const stageText = (s) => (s.role ? s.stage + " " + s.role : "");
  const short = (c) => (c ? c.slice(0, 10) : "");
  const tokens = (n) => (n ? Number(n).toLocaleString("en-US") : "");
  const dollars = (usd) => (usd ? "$" + (usd < 0.1 ? usd.toFixed(4) : usd.toFixed(2)) : "");

  function elapsed(since) {
    if (!since) return "";
    let s = Math.max(0, Math.round((Date.now() + clockSkew - Date.parse(since)) / 1000));
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s %= 60;
    return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(s).padStart(2, "0")}s` : `${s}s`;
  }
  function tickElapsed() {
    for (const e of document.querySelectorAll("[data-since]")) e.textContent = elapsed(e.dataset.since);
  }

  function notice(text, isError) {
    const n = $("#notice");
    n.textContent = text;
    n.className = isError ? "error" : "";
    n.hidden = !text;
  }

  // ---- status ------------------------------------------------------------

  async function refresh() {
    if (fetching) { stale = true; return; }
    fetching = true;
    try {
      do {
        stale = false;
        const r = await fetch("api/status", { cache: "no-store", headers: authed() });
        const body = await r.json();
        if (r.status === 401 || (r.status === 403 && body.code === "bad_token")) {
          notice("This page needs the access token: open the address the host printed (it ends #token=...), or enter the token above.", true);
          return;
        }
        if (!r.ok) throw new Error(body.error || r.statusText);
        if (document.body.dataset.offline) online();
        if ($("#notice").classList.contains("error") && /access token/.test($("#notice").textContent)) notice("");
        clockSkew = Date.parse(body.at) - Date.now();
        status = body;
        if (!source) { await recentEvents(body.seq); follow(body.seq); }
        render();
      } while (stale);
    } catch (err) {
      if (err instanceof TypeError) offline(); // the network failed: no server
      else notice("Reading the status failed: " + err.message, true);
    } finally {
      fetching = false;
    }
  }

  function render() {
    const stories = status.stories || [];
    $("#running").textContent = status.running ? "team running" : "team idle";
    $("#running").className = "badge" + (status.running ? " on" : "");
    const counts = {};
    for (const s of stories) counts[s.state] = (counts[s.state] || 0) + 1;
    $("#counts").replaceChildren(...STATES.filter((s) => counts[s]).map((s) => el("span", {}, stateBadge(s), " " + counts[s])));
    $("#spent").textContent = status.tokens || status.costUSD ?
      `spent ${tokens(status.tokens)} tokens, ${dollars(status.costUSD) || "$0.00"}` : "";
    const refused = $("#refused");
    refused.hidden = !status.refused;
    refused.textContent = status.refused ? `${tokens(status.refused)} refused` : "";
    renderGraph(stories);
    renderEscalations(status.escalations || [], stories, status.actions || []);
    renderWorkers(stories);
    renderStories(stories);
    document.body.dataset.seq = String(status.seq);
  }

  // Stories in columns by depth (a story is one column right of the deepest
  // story it comes after), edges from each dependency to its dependent.
  function renderGraph(all) {
    let stories = all;
    if (all.length > GRAPH_MAX) {
      stories = all.filter((s) => s.state === "running" || s.state === "paused" || s.state === "blocked").slice(0, GRAPH_MAX);
    }
    $("#graph-section h2").textContent = stories === all ? "Dependency graph" :
      `Dependency graph: the ${stories.length} running, paused or blocked stories of ${all.length} (the table lists all)`;
    const byID = new Map(stories.map((s) => [s.id, s]));
    const depth = new Map();
    const depthOf = (s, seen) => {
      if (depth.has(s.id)) return depth.get(s.id);
      if (seen.has(s.id)) return 0; // a cycle cannot be added; be safe anyway
      seen.add(s.id);
      let d = 0;
      for (const a of s.after || []) if (byID.has(a)) d = Math.max(d, depthOf(byID.get(a), seen) + 1);
      depth.set(s.id, d);
      return d;
    };
    const cols = [];
    for (const s of stories) {
      const d = depthOf(s, new Set());
      (cols[d] = cols[d] || []).push(s);
    }
    const pos = new Map();
    cols.forEach((col, c) => col.forEach((s, r) => pos.set(s.id, { x: PAD + c * (NODE_W + GAP_X), y: PAD + r * (NODE_H + GAP_Y) })));
    const rows = Math.max(1, ...cols.map((c) => c.length));
    const g = $("#graph");
    g.setAttribute("width", PAD * 2 + Math.max(1, cols.length) * (NODE_W + GAP_X) - GAP_X);
    g.setAttribute("height", PAD * 2 + rows * (NODE_H + GAP_Y) - GAP_Y);
    const parts = [];
    for (const s of stories) {
      for (const a of s.after || []) {
        const from = pos.get(a), to = pos.get(s.id);
        if (!from || !to) continue;
        const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2, mx = (x1 + x2) / 2;
        parts.push(svg("path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 4},${y2}`, "marker-end": "url(#arrow)" }));
      }
    }
    for (const s of stories) {
      const p = pos.get(s.id);
      const node = svg("g", { class: "node state-" + s.state, transform: `translate(${p.x},${p.y})`, "data-story": s.id, "data-state": s.state, "data-stage": s.stage });
      node.append(svg("title", {}, `${s.id}: ${s.title}\n${s.state}${s.last ? "\nlast: " + s.last : ""}` +
        (s.refused ? `\nrefused ${s.refused}, the last: ${clipText(s.refusedLast || "", MAX_REFUSAL)}` : "")));
      node.append(svg("rect", { width: NODE_W, height: NODE_H }));
      if (s.refused) {
        const mark = svg("g", { class: "refused-mark", transform: `translate(${NODE_W - 34},4)`, "data-refused": s.refused });
        mark.append(svg("rect", { width: 30, height: 15 }), svg("text", { x: 15, y: 11.5 }, s.refused > 999 ? "999+" : String(s.refused)));
        node.append(mark);
      }
      node.append(svg("text", { class: "id", x: 9, y: 17 }, s.id));
      node.append(svg("text", { class: "sub", x: 9 + Math.min(80, s.id.length * 8 + 8), y: 17 }, clip(s.title, 22 - Math.min(10, s.id.length))));
      let line2 = s.state;
      if (s.role) line2 += " · " + s.stage + " " + s.role;
      node.append(svg("text", { x: 9, y: 34 }, line2));
      const line3 = svg("text", { class: "sub", x: 9, y: 50 });
      if (s.state === "running" && s.worker) {
        line3.append(svg("tspan", {}, s.worker + " "));
        line3.append(svg("tspan", { "data-since": s.since || "" }, elapsed(s.since)));
      } else if (s.state === "merged") {
        line3.textContent = "merged " + short(s.commit);
      } else if (s.state === "blocked") {
        line3.textContent = "after " + (s.blockedBy || []).join(", ");
      } else if (s.attempts) {
        line3.textContent = s.attempts + (s.attempts === 1 ? " attempt" : " attempts");
      }
      node.append(line3);
      parts.push(node);
    }
    const defs = svg("defs");
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", fill: "#8790a3" }));
    defs.append(marker);
    g.replaceChildren(defs, ...parts);
  }
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
  // clipText clips by characters, not UTF-16 units (no half a character).
  function clipText(s, n) {
    if (s.length <= n) return s;
    // At most 2n code units hold n characters; cut there, the text went on.
    const chars = Array.from(s.slice(0, 2 * n));
    return chars.length > n || s.length > 2 * n ? chars.slice(0, n - 1).join("") + "…" : chars.join("");
  }

  // ---- refusals ----------------------------------------------------------

  // refusedBadge is a story's count of refused attempts, a button that
  // opens what they were under the story's row.
  function refusedBadge(s) {
    return el("button", { type: "button", class: "refused", "data-story": s.id, "aria-expanded": String(openRefusals.has(s.id)),
      title: "attempts of its agents (and gate checks) beyond their own assignments, refused: none was applied; click for what they were" },
      `${tokens(s.refused)} refused`);
  }

  // when is a time as the page shows it: the time of day today, else the
  // date too.
  function when(t) {
    const d = new Date(t);
    if (isNaN(d)) return "";
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }

  // refusalDetail is what a story's agents were refused: each kind with its
  // count, when it was first and last refused and the last one's detail,
  // then the last refusal. All of it text.
  function refusalDetail(s) {
    const box = el("div", { class: "refusal-detail", "data-story": s.id },
      el("p", {}, `${tokens(s.refused)} attempt${s.refused === 1 ? "" : "s"} beyond its own assignments refused, none applied.`));
    const kinds = s.refusedKinds || [];
    if (kinds.length) {
      let listed = 0;
      const items = kinds.map((k) => {
        listed += k.count || 0;
        return el("li", { "data-count": k.count }, el("span", { class: "n" }, `${tokens(k.count)}×`), " ",
          el("span", { class: "mono detail" }, clipText(k.detail || "", MAX_REFUSAL)),
          el("span", { class: "when" }, k.first === k.last ? ` (at ${when(k.last)})` : ` (first ${when(k.first)}, last ${when(k.last)})`));
      });
      if (s.refused > listed) items.push(el("li", { class: "when" }, `and ${tokens(s.refused - listed)} earlier, of kinds no longer listed`));
      box.append(el("ul", { class: "kinds" }, ...items));
    }
    if (s.refusedLast) box.append(el("p", { class: "last-refused" }, "the last: ", el("span", { class: "mono detail" }, clipText(s.refusedLast, MAX_REFUSAL))));
    return box;
  }

  const refusalRow = (s) => el("tr", { class: "refusals", "data-story": s.id }, el("td", { colspan: 10 }, refusalDetail(s)));

  // A click on a story's badge opens or closes its refusals under its row
  // (one listener for the whole table; kept open across redraws).
  function toggleRefusals(ev) {
    const b = ev.target.closest("button.refused");
    if (!b || !status) return;
    const id = b.dataset.story, row = b.closest("tr");
    const s = (status.stories || []).find((x) => x.id === id);
    const next = row.nextElementSibling;
    if (next && next.classList.contains("refusals")) next.remove();
    if (openRefusals.has(id) || !s) {
      openRefusals.delete(id);
      b.setAttribute("aria-expanded", "false");
      return;
    }
    openRefusals.add(id);
    b.setAttribute("aria-expanded", "true");
    row.after(refusalRow(s));
  }

  function renderEscalations(escs, stories, actions) {
    $("#esc-count").textContent = escs.length ? `(${escs.length})` : "";
    const box = $("#escalations");
    if (!escs.length) { box.replaceChildren(el("p", { class: "empty" }, "Nothing waits for a decision.")); return; }
    const keep = new Map();
    for (const card of box.querySelectorAll(".escalation")) keep.set(card.dataset.key, card);
    box.replaceChildren(...escs.map((e) => keep.get(e.key) || escalationCard(e, stories.find((s) => s.id === e.item), actions)));
  }

  function escalationCard(e, story, actions) {
    const note = el("input", { type: "text", placeholder: "note for the next worker (optional)", "aria-label": "note" });
    const buttons = actions.map((a) => el("button", { type: "button", "data-action": a, "data-story": e.item }, a));
    const card = el("div", { class: "escalation", "data-story": e.item, "data-key": e.key },
      el("h3", {}, e.item, story ? " — " + story.title : ""),
      el("p", {}, `stage ${e.stage}${story && story.role ? " " + story.role : ""} · ${e.reason}`),
      el("p", { class: "msg" }, e.message));
    if (e.suggestedAction) card.append(el("p", { class: "what" }, "what to do: " + e.suggestedAction));
    if (story && story.workerCause) card.append(el("p", { class: "what" }, "cause: " + story.workerCause));
    if (e.files && e.files.length) card.append(el("p", { class: "what mono" }, "files: " + e.files.join(", ")));
    if (story && story.refused) card.append(refusalDetail(story));
    card.append(el("div", { class: "actions" }, note, ...buttons));
    for (const b of buttons) {
      b.addEventListener("click", () => resolve(e, b.dataset.action, note.value, buttons));
    }
    return card;
  }

  async function resolve(e, action, note, buttons) {
    if (!token()) { notice("Enter the token (printed by the host) to act.", true); $("#token").focus(); return; }
    for (const b of buttons) b.disabled = true; // a double click decides once
    try {
      const r = await fetch("api/resolve", {
        method: "POST",
        headers: { ...authed(), "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ story: e.item, action, note, escalation: e.key }),
      });
      const body = await r.json();
      if (!r.ok) throw new Error(body.error || r.statusText);
      notice(`${e.item}: ${action}${body.already ? " (already decided)" : ""}, now ${body.state}.`);
      refresh();
    } catch (err) {
      notice(`${e.item}: ${action} failed: ${err.message}`, true);
      for (const b of buttons) b.disabled = false;
    }
  }

  function renderWorkers(stories) {
    const running = stories.filter((s) => s.state === "running" && s.worker);
    $("#workers-count").textContent = `(${running.length} of ${status.workers})`;
    $("#workers tbody").replaceChildren(...(running.length ? running.map((s) => el("tr", { "data-story": s.id },
      el("td", { class: "mono" }, s.worker), el("td", {}, s.id), el("td", {}, stageText(s)),
      el("td", { "data-since": s.since || "" }, elapsed(s.since)), el("td", {}, s.attempts))) :
      [el("tr", {}, el("td", { colspan: 5, class: "empty" }, "No worker is busy."))]));
  }

  function storyRow(s) {
    const state = el("td", {}, stateBadge(s.state));
    if (s.refused) state.append(" ", refusedBadge(s));
    return el("tr", { "data-story": s.id, "data-state": s.state },
      el("td", { class: "mono" }, s.id), el("td", {}, s.title), state,
      el("td", {}, stageText(s)), el("td", {}, (s.after || []).join(", ")), el("td", {}, s.attempts),
      el("td", { class: "num", "data-tokens": s.tokens || 0 }, tokens(s.tokens)), el("td", { class: "num" }, dollars(s.costUSD)),
      el("td", { class: "last", title: s.last || "" }, s.last || ""), el("td", { class: "mono" }, short(s.commit)));
  }

  // rows are the stories' rows, each followed by its refusals if opened.
  function rows(stories) {
    const out = [];
    for (const s of stories) {
      out.push(storyRow(s));
      if (s.refused && openRefusals.has(s.id)) out.push(refusalRow(s));
    }
    return out;
  }

  function renderStories(stories) {
    const gen = ++renderGen;
    const body = $("#stories tbody");
    body.replaceChildren(...rows(stories.slice(0, FIRST_ROWS)));
    const more = (from) => {
      if (gen !== renderGen || from >= stories.length) return;
      body.append(...rows(stories.slice(from, from + ROWS_PER_STEP)));
      requestAnimationFrame(() => more(from + ROWS_PER_STEP));
    };
    if (stories.length > FIRST_ROWS) requestAnimationFrame(() => more(FIRST_ROWS));
  }

  // ---- events ------------------------------------------------------------

  function follow(after) {
    lastSeq = after;
    // An EventSource cannot send headers: the token goes in the query.
    source = new EventSource("api/stream?after=" + after + "&token=" + encodeURIComponent(token()));
    const live = $("#live");
    source.onopen = () => { live.textContent = "live"; live.className = "badge live-open"; };
    source.onmessage = (m) => {
      const e = JSON.parse(m.data);
      lastSeq = e.seq;
      addEvent(e);
      refresh();
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a replay the server cannot serve, say after its host
        // restarted): start over from a fresh status.
        live.textContent = "reloading"; live.className = "badge live-closed";
        source = null;
        setTimeout(refresh, 2000);
      } else {
        live.textContent = "reconnecting"; live.className = "badge live-connecting";
        // Whether the server is there at all: a status read says.
        refresh();
      }
    };
  }

  // offline says that the page's server is gone: what it shows is the last
  // state it read, its buttons act on nothing, and a person decides the
  // way the server's host said (OfflineHint). The page keeps trying and
  // comes back once the server does.
  function offline() {
    if (document.body.dataset.offline) return;
    document.body.dataset.offline = "1";
    const live = $("#live");
    live.textContent = "server gone"; live.className = "badge live-closed";
    $("#running").textContent = "team not served"; $("#running").className = "badge";
    for (const b of document.querySelectorAll("button[data-action]")) b.disabled = true;
    notice("The server of this page has stopped: the stories below are as they were when it went, and may have moved on since. " +
      (status && status.offlineHint ? status.offlineHint : ""), true);
    if (source) { source.close(); source = null; }
    setTimeout(function retry() { if (document.body.dataset.offline) { refresh(); setTimeout(retry, 5000); } }, 5000);
  }

  function online() {
    delete document.body.dataset.offline;
    notice("");
  }

  // The last events before the page opened, for context.
  async function recentEvents(seq) {
    const r = await fetch("api/events?after=" + Math.max(0, seq - 40) + "&limit=40", { cache: "no-store", headers: authed() });
    if (!r.ok) return;
    const body = await r.json();
    $("#events").replaceChildren();
    for (const e of body.events) if (e.seq <= seq) addEvent(e);
  }

  function addEvent(e) {
    const list = $("#events");
    const t = new Date(e.at).toLocaleTimeString();
    let what = [e.story, e.role ? `stage ${e.stage} ${e.role}` : "", e.outcome, e.action, e.commit ? short(e.commit) : "",
      e.tokens ? tokens(e.tokens) + " tokens" : "", dollars(e.costUSD)].filter(Boolean).join(" · ");
    const detail = e.escalation ? e.escalation.message : e.detail;
    if (detail) what += " — " + clip(detail, 140);
    list.prepend(el("li", { value: e.seq, "data-seq": e.seq }, el("span", { class: "mono" }, t + " "), el("span", { class: "kind" }, e.kind), " " + what));
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  function legend() {
    $("#legend").replaceChildren(...STATES.map((s) => el("span", {}, el("i", { class: "state " + s }), s)));
  }

  window.foremanLoadedAt = Date.now(); // a test checks the page never reloads
  initToken();
  legend();
  $("#stories tbody").addEventListener("click", toggleRefusals);
  refresh();
  setInterval(tickElapsed, 1000);
  // A safety net: what changes without an event (a worker's attempts after
  // a crash, say) shows within seconds.
  setInterval(refresh, 5000);
})();
