// groupfit console: plain DOM, one vendored chart library (uPlot). Every text that comes from the service
// (group, topic and consumer names are chosen by users) is written with textContent, never as HTML.
"use strict";

const TOKEN_KEY = "groupfit-token";
const REPLAY_DEFAULT = "mwf,bfd,repack";

// ---- DOM and HTTP helpers ----

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function fmt(value, digits = 2) {
  if (value === null || value === undefined) return "–";
  if (typeof value !== "number") return String(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

function age(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 120) return `${seconds.toFixed(0)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(0)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = body.error || {};
    throw new ApiError(response.status, error.code || "http_" + response.status, error.message || response.statusText);
  }
  return body;
}

const groupPath = (group) => `/v1/groups/${encodeURIComponent(group)}`;

function errorBlock(error) {
  return el("p", { class: "error", role: "alert" }, `${error.code || "error"}: ${error.message}`);
}

function show(...children) {
  const view = document.getElementById("view");
  view.replaceChildren(...children);
}

function chart(title, xLabel, yLabel, xs, series, width = 360) {
  // series: [{label, values}]
  const palette = ["#4a78c2", "#c0392b", "#2f7d4f", "#8e44ad", "#d68910", "#17a589"];
  const holder = el("div", { class: "chart" });
  const options = {
    title,
    width,
    height: 200,
    scales: { x: { time: false } },
    axes: [{ label: xLabel, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, { label: yLabel }],
    series: [{ label: xLabel }, ...series.map((s, i) => ({ label: s.label, stroke: palette[i % palette.length], width: 2 }))],
  };
  new uPlot(options, [xs, ...series.map((s) => s.values)], holder);
  return holder;
}

// ---- Groups ----

async function groupsView() {
  const filter = el("input", { id: "filter", type: "search", placeholder: "filter by name" });
  const body = el("tbody");
  const table = el(
    "table",
    { id: "groups" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...["group", "version", "algorithm", "consumers", "last Rscore", "capacity", "partitions", "rates window end", "rates age"].map(
          (h, i) => el("th", { class: i >= 3 && i !== 7 ? "num" : "" }, h),
        ),
      ),
    ),
    body,
  );
  const status = el("p", { class: "muted" });
  show(el("h1", {}, "Groups"), el("section", {}, el("div", { class: "toolbar" }, filter), table, status));
  let listing;
  try {
    listing = await api("/v1/groups");
  } catch (error) {
    status.replaceChildren(errorBlock(error));
    return;
  }
  const render = () => {
    const needle = filter.value.trim().toLowerCase();
    const rows = listing.groups.filter((g) => g.group.toLowerCase().includes(needle));
    body.replaceChildren(
      ...rows.map((g) =>
        el(
          "tr",
          {},
          el("td", {}, el("a", { href: "#/group/" + encodeURIComponent(g.group), text: g.group })),
          el("td", { class: "num" }, fmt(g.version)),
          el("td", {}, fmt(g.algorithm)),
          el("td", { class: "num" }, fmt(g.consumers)),
          el("td", { class: "num" }, fmt(g.rscore, 3)),
          el("td", { class: "num" }, fmt(g.capacity)),
          el("td", { class: "num" }, fmt(g.partition_count)),
          el("td", {}, fmt(g.rates_window_end)),
          el("td", { class: "num" }, age(g.rates_age_s)),
        ),
      ),
    );
    status.textContent = `${rows.length} of ${listing.groups.length} groups` + (listing.truncated ? " (listing truncated)" : "");
  };
  filter.addEventListener("input", render);
  render();
}

// ---- One group ----

// Each consumer's load: summed from the stored rates when there are some (PUT …/rates, maybe newer than the
// version), else as the version's answer gave it (stored with it: rates sent in the request), else unknown (0).
function loadsSource(state, rates) {
  if (rates) return { kind: "rates", text: `Loads from the stored rates (window end ${rates.window_end}).` };
  if (state.loads) return { kind: "answer", text: `No stored rates: loads as the last answer gave them (version ${state.version}).` };
  return { kind: "none", text: "No stored rates: loads unknown." };
}

function consumerBars(state, rates) {
  const rateOf = new Map(rates ? rates.partitions.map((p) => [`${p.topic}\u0000${p.partition}`, p.rate]) : []);
  const answered = rates ? null : state.loads;
  const rows = Object.entries(state.assignment).map(([consumer, partitions]) => {
    const load = answered
      ? answered[consumer] || 0
      : partitions.reduce((sum, p) => sum + (rateOf.get(`${p.topic}\u0000${p.partition}`) || 0), 0);
    return { consumer, partitions, load, overloaded: load > state.capacity * (1 + 1e-9) };
  });
  const scale = Math.max(state.capacity, ...rows.map((r) => r.load)) || 1;
  const list = el("div", { id: "consumers" });
  for (const row of rows) {
    const fill = el("div", { class: "fill" });
    fill.style.width = `${(100 * row.load) / scale}%`;
    const mark = el("div", { class: "capacity-mark", title: "capacity" });
    mark.style.left = `${(100 * state.capacity) / scale}%`;
    const label = el("div", {}, `${fmt(row.load)} / ${fmt(state.capacity)} (${fmt((100 * row.load) / state.capacity, 0)} %) `);
    if (row.overloaded) label.append(el("span", { class: "badge overloaded", text: "overloaded" }));
    const named = (p) => `${p.topic}/${p.partition}` + (rates ? ` (${fmt(rateOf.get(`${p.topic}\u0000${p.partition}`))})` : "");
    const partitions = row.partitions.map(named).join(", ");
    const rack = state.racks ? state.racks[row.consumer] : undefined;
    list.append(
      el(
        "div",
        { class: "consumer" + (row.overloaded ? " overloaded" : ""), "data-consumer": row.consumer },
        el("div", { class: "name", text: rack ? `${row.consumer} · ${rack}` : row.consumer }),
        el("div", { class: "track" }, fill, mark),
        label,
        el("div", { class: "partitions", text: partitions || "no partitions" }),
      ),
    );
  }
  return list;
}

function lastRebalance(entry) {
  const section = el("section", { id: "last-rebalance" }, el("h2", {}, `Last rebalance (version ${entry.version})`));
  section.append(
    el(
      "div",
      { class: "facts" },
      ...[
        ["algorithm", entry.algorithm],
        ["consumers", entry.consumer_count],
        ["Rscore", fmt(entry.rscore, 3)],
        ["moves", entry.moves_count],
        ["moved rate", fmt(entry.moved_rate)],
        ...(entry.cross_zone_rate === undefined ? [] : [["cross-zone rate", fmt(entry.cross_zone_rate)]]),
        ["at", entry.updated_at],
      ].map(([k, v]) => el("div", {}, el("span", {}, k), fmt(v))),
    ),
  );
  const moves = entry.moves || [];
  if (!moves.length) {
    section.append(el("p", { class: "muted" }, "No partition changed consumer."));
    return section;
  }
  section.append(
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, ...["partition", "from", "to", "rate"].map((h) => el("th", { class: h === "rate" ? "num" : "" }, h)))),
      el("tbody", {}, ...moves.map((m) => el("tr", {}, el("td", {}, `${m.topic}/${m.partition}`), el("td", {}, m.from), el("td", {}, m.to), el("td", { class: "num" }, fmt(m.rate))))),
    ),
  );
  // Δ = X(t_k) − X(t_k−1) over the moved partitions: −1 where a consumer stops, +1 where one starts
  const consumers = [...new Set(moves.flatMap((m) => [m.from, m.to]))].sort();
  const shown = moves.slice(0, 12);
  const delta = el(
    "table",
    { class: "delta" },
    el("thead", {}, el("tr", {}, el("th", {}, "Δ"), ...shown.map((m) => el("th", {}, `${m.topic}/${m.partition}`)))),
    el(
      "tbody",
      {},
      ...consumers.map((c) =>
        el(
          "tr",
          {},
          el("th", {}, c),
          ...shown.map((m) => (m.from === c ? el("td", { class: "minus" }, "−1") : m.to === c ? el("td", { class: "plus" }, "+1") : el("td", {}, ""))),
        ),
      ),
    ),
  );
  section.append(el("h2", {}, "Delta"), delta);
  if (moves.length > shown.length) section.append(el("p", { class: "muted" }, `first ${shown.length} of ${moves.length} moved partitions shown`));
  return section;
}

async function groupView(group) {
  const path = groupPath(group);
  show(el("h1", {}, group), el("p", { class: "muted" }, "loading…"));
  let state;
  try {
    state = await api(path);
  } catch (error) {
    show(el("h1", {}, group), errorBlock(error));
    return;
  }
  const [rates, history, scale] = await Promise.all(
    [api(path + "/rates"), api(path + "/history?limit=500"), api(path + "/scale")].map((p) => p.catch((error) => ({ error }))),
  );
  const parts = [
    el("h1", {}, group),
    el(
      "p",
      {},
      el("a", { href: "#/whatif/" + encodeURIComponent(group) }, "What-if: these rates through other algorithms"),
      " · ",
      el("a", { href: "#/replay/" + encodeURIComponent(group) }, "Replay the stored rates history"),
    ),
    el(
      "section",
      {},
      el(
        "div",
        { class: "facts" },
        ...[
          ["version", state.version],
          ["algorithm", state.algorithm],
          ["capacity", state.capacity],
          ["updated", state.updated_at],
        ].map(([k, v]) => el("div", {}, el("span", {}, k), fmt(v))),
      ),
    ),
  ];
  if (!scale.error) {
    parts.push(
      el(
        "section",
        { id: "scale" },
        el("h2", {}, "Scaling signal "),
        el("p", {}, el("span", { class: `badge ${scale.action}`, text: `${scale.action}: needs ${scale.needed}, has ${scale.current}` })),
        el("p", { class: "muted", text: scale.reason }),
      ),
    );
  }
  const loads = el("section", {}, el("h2", {}, "Consumers: load against capacity"));
  const source = loadsSource(state, rates.error ? null : rates);
  loads.append(el("p", { id: "loads-source", class: "muted", "data-source": source.kind, text: source.text }));
  loads.append(consumerBars(state, rates.error ? null : rates));
  parts.push(loads);
  if (!history.error && history.versions.length) {
    parts.push(lastRebalance(history.versions[0]));
    const versions = [...history.versions].reverse();
    const xs = versions.map((v) => v.version);
    parts.push(
      el(
        "section",
        { id: "history" },
        el("h2", {}, `History (${versions.length} versions)`),
        el(
          "div",
          { class: "charts" },
          chart("Consumers per version", "version", "consumers", xs, [{ label: "consumers", values: versions.map((v) => v.consumer_count) }]),
          chart("Rscore per version", "version", "Rscore", xs, [{ label: "Rscore", values: versions.map((v) => v.rscore) }]),
          chart("Moved rate per version", "version", "rate moved", xs, [{ label: "moved rate", values: versions.map((v) => v.moved_rate ?? null) }]),
          ...(versions.some((v) => v.cross_zone_rate !== undefined)
            ? [chart("Cross-zone rate per version", "version", "rate across zones", xs, [{ label: "cross-zone rate", values: versions.map((v) => v.cross_zone_rate ?? null) }])]
            : []),
        ),
      ),
    );
  }
  if (!rates.error) {
    const rows = rates.partitions.slice(0, 500);
    parts.push(
      el(
        "section",
        { id: "rates" },
        el("h2", {}, `Rates (window end ${rates.window_end}, stored ${rates.updated_at})`),
        el(
          "table",
          {},
          el("thead", {}, el("tr", {}, el("th", {}, "partition"), el("th", { class: "num" }, "rate"), el("th", { class: "num" }, "lag"))),
          el("tbody", {}, ...rows.map((p) => el("tr", {}, el("td", {}, `${p.topic}/${p.partition}`), el("td", { class: "num" }, fmt(p.rate)), el("td", { class: "num" }, fmt(p.lag))))),
        ),
        rates.partitions.length > rows.length ? el("p", { class: "muted" }, `first ${rows.length} of ${rates.partitions.length}`) : null,
      ),
    );
  }
  show(...parts);
}

// ---- What-if ----

// Whether the what-if runs an algorithm unless unchecked, from its entry in GET /v1/algorithms: when every parameter
// has a stated default, the group's stored rates and assignment are all it needs. One with a parameter of no default
// (kip441's member lags, exact's anti-collocation sets) is meant to be given more than a group stores.
function whatIfByDefault(algorithm) {
  return Object.values((algorithm.params || {}).properties || {}).every((parameter) => "default" in parameter);
}

async function whatIfView(group) {
  const registry = await api("/v1/algorithms").catch((error) => ({ error }));
  if (registry.error) {
    show(el("h1", {}, `What-if: ${group}`), errorBlock(registry.error));
    return;
  }
  const boxes = registry.algorithms.map((a) => {
    const box = el("input", { type: "checkbox", value: a.name });
    box.checked = whatIfByDefault(a);
    return el("label", { title: a.description }, box, a.name);
  });
  const body = el("tbody");
  const run = el("button", { type: "button", id: "run-whatif" }, "Run dry runs");
  const table = el(
    "table",
    { id: "whatif" },
    el(
      "thead",
      {},
      el("tr", {}, ...["algorithm", "consumers", "Rscore", "moves", "moved rate", "overloaded consumers", ""].map((h, i) => el("th", { class: i >= 1 && i <= 4 ? "num" : "" }, h))),
    ),
    body,
  );
  show(
    el("h1", {}, `What-if: ${group}`),
    el("p", { class: "muted" }, "The group's stored rates and assignment through each algorithm as a dry run (nothing is stored)."),
    el("section", {}, el("div", { class: "toolbar" }, ...boxes, run), table),
    el("p", {}, el("a", { href: "#/group/" + encodeURIComponent(group) }, "← back to the group")),
  );
  const execute = async () => {
    const chosen = boxes.map((b) => b.firstChild).filter((b) => b.checked).map((b) => b.value);
    body.replaceChildren(...chosen.map((name) => el("tr", { "data-algorithm": name }, el("td", {}, name), el("td", { colspan: "6", class: "muted" }, "running…"))));
    await Promise.all(
      chosen.map(async (name, i) => {
        const row = body.children[i];
        try {
          const answer = await api("/v1/assign", { method: "POST", body: { algorithm: name, group, dry_run: true } });
          const overloaded = answer.consumers.filter((c) => c.utilization > 1 + 1e-9).map((c) => c.id);
          const movedRate = answer.moves.reduce((sum, m) => sum + m.rate, 0);
          row.replaceChildren(
            el("td", {}, name),
            el("td", { class: "num" }, fmt(answer.consumer_count)),
            el("td", { class: "num" }, fmt(answer.rscore, 3)),
            el("td", { class: "num" }, fmt(answer.moves.length)),
            el("td", { class: "num" }, fmt(movedRate)),
            el("td", {}, overloaded.length ? el("span", { class: "badge overloaded", text: `${overloaded.length}: ${overloaded.join(", ")}` }) : "0"),
            el("td", {}, ""),
          );
          row.dataset.done = "ok";
        } catch (error) {
          row.replaceChildren(el("td", {}, name), el("td", { colspan: "6" }, errorBlock(error)));
          row.dataset.done = "error";
        }
      }),
    );
    table.dataset.complete = "true";
  };
  run.addEventListener("click", execute);
  execute();
}

// ---- Replay ----

async function replayView(group) {
  const names = el("input", { id: "replay-algorithms", value: REPLAY_DEFAULT, size: "40" });
  const windows = el("input", { id: "replay-windows", type: "number", value: "200", min: "1" });
  const run = el("button", { type: "button" }, "Replay");
  const out = el("div", { id: "replay" });
  show(
    el("h1", {}, `Replay: ${group}`),
    el("p", { class: "muted" }, "The group's stored rates windows, oldest first, through each algorithm from its own previous assignment; latency from the model of Landau et al. §VI-C."),
    el("section", {}, el("div", { class: "toolbar" }, el("label", {}, "algorithms ", names), el("label", {}, "windows ", windows), run), out),
    el("p", {}, el("a", { href: "#/group/" + encodeURIComponent(group) }, "← back to the group")),
  );
  const execute = async () => {
    out.replaceChildren(el("p", { class: "muted" }, "replaying…"));
    let replay;
    try {
      const query = new URLSearchParams({ algorithms: names.value, windows: windows.value });
      replay = await api(`${groupPath(group)}/replay?${query}`);
    } catch (error) {
      out.replaceChildren(errorBlock(error));
      return;
    }
    const results = Object.entries(replay.results);
    const latency = (r, p) => (r.latency ? fmt(r.latency[p]) : "–");
    out.replaceChildren(
      el("p", { class: "muted" }, `${replay.windows} windows from ${replay.window_ends[0]} to ${replay.window_ends[replay.window_ends.length - 1]}, ${fmt(replay.iteration_s, 1)} s apart (median), capacity ${fmt(replay.capacity)}`),
      el(
        "table",
        { id: "replay-table" },
        el(
          "thead",
          {},
          el("tr", {}, ...["algorithm", "avg consumers", "avg Rscore", "CBS", "moved bytes", "windows overloaded", "p99 latency s", "max latency s"].map((h, i) => el("th", { class: i ? "num" : "" }, h))),
        ),
        el(
          "tbody",
          {},
          ...results.map(([name, r]) =>
            el(
              "tr",
              {},
              el("td", {}, name),
              el("td", { class: "num" }, fmt(r.avg_consumers)),
              el("td", { class: "num" }, fmt(r.avg_rscore, 3)),
              el("td", { class: "num" }, fmt(r.cbs, 3)),
              el("td", { class: "num" }, fmt(r.moved_bytes, 0)),
              el("td", { class: "num" }, fmt(r.overloaded_windows)),
              el("td", { class: "num" }, latency(r, "p99")),
              el("td", { class: "num" }, latency(r, "max")),
            ),
          ),
        ),
      ),
      el(
        "div",
        { class: "charts" },
        chart("Consumers per window", "window", "consumers", replay.window_ends.map((_, i) => i + 1), results.map(([name, r]) => ({ label: name, values: r.consumers })), 520),
        chart("Rscore per window", "window", "Rscore", replay.window_ends.map((_, i) => i + 1), results.map(([name, r]) => ({ label: name, values: r.rscore })), 520),
      ),
    );
  };
  run.addEventListener("click", execute);
  execute();
}

// ---- Routing and the token ----

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [page, ...rest] = hash.split("/");
  const group = decodeURIComponent(rest.join("/"));
  const views = { group: groupView, whatif: whatIfView, replay: replayView };
  (views[page] && group ? views[page](group) : groupsView()).catch((error) => show(errorBlock(error)));
}

document.getElementById("token").value = sessionStorage.getItem(TOKEN_KEY) || "";
document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = document.getElementById("token").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  route();
});
window.addEventListener("hashchange", route);
route();
