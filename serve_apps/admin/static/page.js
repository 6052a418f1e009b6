// The operator page's script, served at /admin/ui.js (serve_apps/admin/_page.py fills in the three
// constants below and gives the page its sha384 as the script tag's integrity). Text nodes only.
"use strict";
(() => {
  const TOKEN_KEY = __TOKEN_KEY__;
  const ROLES = __ROLES__;
  const POLICIES = __POLICIES__;
  const API = new URL(".", window.location.href);  // the admin API: this page's folder
  const DASH = "\u2014";
  let generation = 0;  // bumped at sign-out: answers of an earlier session are dropped

  const $ = (id) => document.getElementById(id);

  // Every node is built here: attributes with setAttribute, text with text nodes, never parsed markup.
  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = String(value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  const show = (v) => (v === null || v === undefined || v === "" ? DASH : String(v));
  const fixed = (v, digits) => (typeof v === "number" ? v.toFixed(digits) : DASH);
  const count = (v) => (typeof v === "number" ? String(v) : DASH);
  const yes = (v) => (v ? "yes" : "no");
  function when(seconds) {
    if (typeof seconds !== "number" || !(seconds > 0)) return DASH;
    return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }
  function duration(seconds) {
    if (typeof seconds !== "number" || seconds < 0) return DASH;
    if (seconds < 120) return seconds.toFixed(1) + " s";
    if (seconds < 7200) return (seconds / 60).toFixed(1) + " min";
    return (seconds / 3600).toFixed(1) + " h";
  }

  // A cell: a plain value, or {text, field, cls, title, node}.
  function cell(c) {
    if (c !== null && typeof c === "object" && !(c instanceof Node)) {
      const content = c.node !== undefined ? c.node : show(c.text);
      return h("td", { "data-field": c.field, class: c.cls, title: c.title }, content);
    }
    return h("td", {}, c instanceof Node ? c : show(c));
  }
  function table(name, columns, rows, empty) {
    if (!rows.length) return h("p", { class: "empty", "data-empty": name }, empty || "none");
    return h(
      "table",
      { "data-table": name },
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map((r) => h("tr", r.attrs || {}, r.cells.map(cell)))),
    );
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function detailOf(data) {
    if (!data || typeof data !== "object") return null;
    const d = data.detail;
    if (typeof d === "string") return d;
    if (Array.isArray(d)) return d.map((e) => [(e.loc || []).join("."), e.msg].filter(Boolean).join(": ")).join("; ");
    return null;
  }

  function errorNode(err) {
    const status = err instanceof ApiError ? err.status : "network";
    const text = err instanceof ApiError ? `HTTP ${err.status}: ${err.message}` : `request failed: ${err.message}`;
    return h("p", { class: "error", role: "alert", "data-error": status }, text);
  }

  async function call(method, path, body) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) throw new ApiError(401, "not signed in");
    const headers = { Authorization: "Bearer " + token, Accept: "application/json" };
    const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
    init.referrerPolicy = "no-referrer";
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(new URL(path, API), init);
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (response.status === 401) {
      signOut("The admin token was refused (HTTP 401). Enter it again.");
      throw new ApiError(401, "the admin token was refused");
    }
    if (!response.ok) {
      const message = detailOf(data) || response.statusText || text.slice(0, 200) || "error";
      throw new ApiError(response.status, message);
    }
    return data;
  }

  // ---- the page's parts ----------------------------------------------------------------------
  const SECTIONS = [
    ["roles", "Roles and policies"],
    ["providers", "Providers"],
    ["gate", "Compatibility gate"],
    ["budget", "Budget"],
    ["spend", "Spend against caps (today)"],
    ["indexes", "Indexes"],
    ["sidecars", "Sidecar fleet"],
    ["jobs", "Recent jobs"],
    ["audit", "Audit log (latest 50)"],
  ];

  function put(id, ...nodes) {
    const target = $("body-" + id);
    if (target) target.replaceChildren(...nodes);
  }
  function result(id, ...nodes) {
    const target = $("result-" + id);
    if (target) target.replaceChildren(...nodes);
  }
  const note = (cls, text, attrs) => h("p", { class: cls, ...(attrs || {}) }, text);

  function options(values, selected) {
    return values.map((v) => h("option", { value: v, selected: v === selected }, v));
  }

  function buildDashboard() {
    const root = $("dashboard");
    root.replaceChildren();
    for (const [id, title] of SECTIONS) {
      root.append(
        h(
          "section",
          { id: "section-" + id, "aria-labelledby": "h-" + id },
          h("h2", { id: "h-" + id }, title),
          h("div", { id: "actions-" + id }),
          h("div", { id: "result-" + id, role: "status" }),
          h("div", { id: "body-" + id }, note("loading", "loading\u2026")),
        ),
      );
    }
    const policyForm = h(
      "form",
      { id: "policy-form" },
      h("label", { for: "policy-role" }, "Push a policy: role"),
      h("select", { id: "policy-role" }, options(ROLES, ROLES[0])),
      h("label", { for: "policy-value" }, "policy"),
      h("select", { id: "policy-value" }, options(POLICIES, POLICIES[0])),
      h("button", { id: "policy-push", type: "submit" }, "Push policy"),
    );
    policyForm.addEventListener("submit", (event) => {
      event.preventDefault();
      pushPolicy($("policy-role").value, $("policy-value").value);
    });
    $("actions-roles").append(policyForm);

    const verify = h("button", { id: "gate-verify", type: "button" }, "Re-verify gate");
    verify.addEventListener("click", () => verifyGate(verify));
    $("actions-gate").append(verify);

    const capForm = h(
      "form",
      { id: "cap-form" },
      h("label", { for: "cap-role" }, "Set a daily cap: role"),
      h("select", { id: "cap-role" }, options(ROLES, ROLES[0])),
      h("label", { for: "cap-credits" }, "credits"),
      h("input", { id: "cap-credits", type: "number", min: "0", step: "any", placeholder: "empty: no cap" }),
      h("button", { id: "cap-set", type: "submit" }, "Set cap"),
    );
    capForm.addEventListener("submit", (event) => {
      event.preventDefault();
      setCap($("cap-role").value, $("cap-credits").value);
    });
    $("actions-spend").append(capForm);
  }

  // ---- roles and providers -------------------------------------------------------------------
  function renderRoles(data, openrouter) {
    const answers = data.roles || {};
    const configured = openrouter && openrouter.policies ? openrouter.policies : {};
    const rows = ROLES.map((role) => {
      const views = data[role] || [];
      const answer = answers[role] || {};
      const inForce = views.length ? views[0].policy_in_force : null;
      const serving = (kind) => views.filter((v) => v.serves === kind).length;
      return {
        attrs: { "data-role": role },
        cells: [
          { text: role, field: "role" },
          {
            text: show(answer.status) + (answer.detail ? ": " + answer.detail : ""),
            field: "dispatcher",
            cls: answer.status === "ok" ? "ok" : "bad",
          },
          { text: inForce, field: "policy" },
          { text: configured[role], field: "configured" },
          { text: count(serving("pool")), field: "pool", cls: "num" },
          { text: count(serving("reserve")), field: "reserve", cls: "num" },
          { text: count(serving("no")), field: "excluded", cls: "num" },
        ],
      };
    });
    const columns = ["Role", "Dispatcher", "Policy in force", "Configured policy", "Pool", "Reserve", "Excluded"];
    const parts = [table("roles", columns, rows)];
    if (openrouter instanceof Error) parts.push(errorNode(openrouter));
    else if (openrouter) {
      const key = openrouter.key_pushed ? "pushed " + when(openrouter.last_pushed_at) : "not pushed";
      const text = `OpenRouter key: ${key}; base URL ${show(openrouter.base_url)}`;
      parts.push(note("muted", text, { "data-field": "key" }));
      for (const line of openrouter.disagreements || []) parts.push(note("bad", "disagreement: " + line));
    }
    put("roles", ...parts);
  }

  function gateText(gate) {
    if (!gate) return DASH;
    const cos = typeof gate.min_cosine === "number" ? ` (min cos ${gate.min_cosine.toFixed(4)})` : "";
    return gate.verdict + cos;
  }

  function renderProviders(data) {
    const rows = [];
    for (const role of ROLES) {
      for (const view of data[role] || []) {
        const p = view.provider || {};
        rows.push({
          attrs: { "data-role": role, "data-provider": p.name },
          cells: [
            role,
            { text: p.name, field: "provider" },
            p.kind,
            `${show(p.hosted)} on ${show(p.host)}`,
            { text: p.model + (p.upstream ? " @ " + p.upstream : ""), field: "model" },
            { text: view.serves, field: "serves" },
            { text: view.policy_applied, field: "policy-applied" },
            { text: p.eligible ? "yes" : "no: " + show(p.reason), cls: p.eligible ? "ok" : "bad" },
            { text: count(p.served), cls: "num" },
            { text: count(p.failures), cls: "num" },
            {
              text: gateText(view.gate),
              field: "gate",
              cls: view.gate && view.gate.verdict !== "verified" ? "bad" : "",
            },
          ],
        });
      }
    }
    const columns = ["Role", "Provider", "Kind", "Runs", "Model", "Serves", "Policy applied", "Eligible"];
    columns.push("Served", "Failures", "Gate");
    put("providers", table("providers", columns, rows, "no provider answered"));
  }

  async function loadProviders() {
    const [providers, openrouter] = await Promise.allSettled([call("GET", "providers"), call("GET", "openrouter")]);
    if (providers.status === "rejected") throw providers.reason;
    const policies = openrouter.status === "fulfilled" ? openrouter.value : openrouter.reason;
    return { providers: providers.value, openrouter: policies };
  }
  function renderProvidersAndRoles(both) {
    renderRoles(both.providers, both.openrouter);
    renderProviders(both.providers);
  }

  // ---- the gate ------------------------------------------------------------------------------
  function renderGate(data) {
    const rows = [];
    const parts = [];
    for (const [role, reports] of Object.entries(data)) {
      if (role === "roles" || !Array.isArray(reports)) continue;
      for (const r of reports) {
        const key = r.key || {};
        rows.push({
          attrs: { "data-role": role, "data-provider": key.provider },
          cells: [
            role,
            key.provider,
            key.model + (key.upstream ? " @ " + key.upstream : ""),
            key.regime,
            { text: r.verdict, field: "verdict", cls: r.verdict === "verified" ? "ok" : "bad" },
            r.coverage,
            r.reference,
            { text: fixed(r.min_cosine, 4), cls: "num" },
            { text: fixed(r.mean_cosine, 4), cls: "num" },
            { text: `${show(r.width)} / ${show(r.expected_width)}`, cls: "num" },
            r.detail,
          ],
        });
      }
    }
    for (const [role, answer] of Object.entries(data.roles || {})) {
      if (answer.status === "ok") continue;
      parts.push(note("bad", `${role}: ${answer.status}${answer.detail ? ": " + answer.detail : ""}`));
    }
    const columns = ["Role", "Provider", "Model", "Regime", "Verdict", "Coverage", "Reference"];
    columns.push("Min cos", "Mean cos", "Width", "Detail");
    put("gate", table("gate", columns, rows, "no verdict yet"), ...parts);
  }

  async function verifyGate(button) {
    const gen = generation;
    button.disabled = true;
    result("gate", note("loading", "re-verifying\u2026"));
    try {
      const data = await call("POST", "gate/verify");
      if (gen !== generation) return;
      renderGate(data);
      result("gate", note("ok", "gate re-verified " + when(Date.now() / 1000), { "data-result": "ok" }));
      await load(["roles", "providers"], loadProviders, renderProvidersAndRoles);
    } catch (err) {
      if (gen === generation) result("gate", errorNode(err));
    } finally {
      button.disabled = false;
    }
  }

  async function pushPolicy(role, policy) {
    const gen = generation;
    const button = $("policy-push");
    button.disabled = true;
    result("roles", note("loading", `pushing ${policy} for ${role}\u2026`));
    try {
      const data = await call("POST", "openrouter", { policies: { [role]: policy } });
      if (gen !== generation) return;
      if (data.ok) {
        const to = (data.pushed_to || []).length;
        const containers = to ? `; ${to} virtual containers updated` : "";
        result("roles", note("ok", `pushed policy ${policy} for ${role}${containers}`, { "data-result": "ok" }));
      } else {
        result("roles", note("error", "not applied: " + (data.issues || []).join("; "), { "data-result": "issues" }));
      }
      await load(["roles", "providers"], loadProviders, renderProvidersAndRoles);
    } catch (err) {
      if (gen === generation) result("roles", errorNode(err));
    } finally {
      button.disabled = false;
    }
  }

  // ---- budget and spend ----------------------------------------------------------------------
  function renderBudget(data) {
    const perPriority = (byPriority) => Object.entries(byPriority || {}).map(([p, n]) => `${p} ${n}`).join(", ");
    const waiting = Object.entries(data.waiting || {})
      .map(([project, byPriority]) => `${project}: ${perPriority(byPriority)}`)
      .join("; ");
    const rows = [
      ["ceiling", "Ceiling", `${count(data.ceiling)} (${show(data.source)})`],
      ["effective", "Effective permits", count(data.effective)],
      ["in_flight", "In flight", count(data.in_flight)],
      ["state", "State", data.state],
      ["reason", "Why", data.reason],
      ["requests", "Requests started", count(data.requests)],
      ["rate_limited", "Answered 429", count(data.rate_limited)],
      ["window_rpm", "Window gate (rpm)", data.window_rpm === null ? "none armed" : fixed(data.window_rpm, 1)],
      ["cooldown", "Cooldown", data.cooldown_until === null || data.cooldown_until === undefined ? "none" : "active"],
      ["latency", "Latency (EWMA)", typeof data.latency_ewma_s === "number" ? duration(data.latency_ewma_s) : DASH],
      ["waiting", "Waiting", waiting || "nobody"],
    ].map(([field, label, value]) => ({
      attrs: { "data-budget": field },
      cells: [label, { text: value, field: "value" }],
    }));
    put("budget", table("budget", ["Figure", "Value"], rows));
    renderSpend(data.spend);
  }

  function renderSpend(spend) {
    if (!spend || typeof spend !== "object") {
      put("spend", note("empty", "no spend recorded", { "data-empty": "spend" }));
      return;
    }
    const head = note("muted", `day ${show(spend.day)}, resets at ${show(spend.resets_at)}`, { "data-field": "day" });
    const entries = Object.entries(spend.roles || {});
    if (!entries.length) {
      put("spend", head, note("empty", "no spend recorded", { "data-empty": "spend" }));
      return;
    }
    const rows = entries.map(([role, s]) => ({
      attrs: { "data-role": role },
      cells: [
        role,
        { text: fixed(s.spent, 4), field: "spent", cls: "num" },
        { text: fixed(s.estimated, 4), field: "estimated", cls: "num" },
        { text: s.cap === null || s.cap === undefined ? "no cap" : fixed(s.cap, 4), field: "cap", cls: "num" },
        { text: s.state, field: "state", cls: s.state === "capped" ? "bad" : "" },
        { text: count(s.calls), cls: "num" },
        { text: count(s.refused), cls: "num" },
      ],
    }));
    put("spend", head, table("spend", ["Role", "Spent", "Estimated", "Cap", "State", "Calls", "Refused"], rows));
  }

  async function setCap(role, raw) {
    const gen = generation;
    const value = raw.trim() === "" ? null : Number(raw);
    if (value !== null && !(Number.isFinite(value) && value >= 0)) {
      result("spend", note("error", "a cap is a number of credits, 0 or more (empty: no cap)"));
      return;
    }
    const button = $("cap-set");
    button.disabled = true;
    result("spend", note("loading", `setting the cap of ${role}\u2026`));
    try {
      const data = await call("PUT", "budget/caps", { caps: { [role]: value } });
      if (gen !== generation) return;
      const text = value === null ? `removed the cap of ${role}` : `set the cap of ${role} to ${value} credits a day`;
      result("spend", note("ok", text, { "data-result": "ok" }));
      if (data && data.spend) renderSpend(data.spend);
      await load(["budget", "spend"], () => call("GET", "budget"), renderBudget);
    } catch (err) {
      if (gen === generation) result("spend", errorNode(err));
    } finally {
      button.disabled = false;
    }
  }

  // ---- indexes, sidecars, jobs ---------------------------------------------------------------
  function commitOf(...sources) {
    for (const s of sources) {
      if (!s) continue;
      const src = s.source || s;
      if (src && typeof src.commit === "string") {
        const where = src.ref || src.branch;
        return src.commit.slice(0, 12) + (where ? ` (${where})` : "") + (src.dirty ? ", dirty" : "");
      }
    }
    return null;
  }
  function freshnessOf(...sources) {
    for (const s of sources) {
      if (!s) continue;
      if (typeof s.freshness === "string") return s.freshness;
      const st = s.staleness;
      if (st && typeof st === "object") {
        const behind = typeof st.commits_behind === "number" ? st.commits_behind : 0;
        if (!st.changed_files && !behind) return "up to date";
        const parts = [];
        if (st.changed_files) parts.push(`${st.changed_files} files changed`);
        if (behind) parts.push(`${behind} commits behind`);
        return parts.join(", ");
      }
    }
    return null;
  }
  function progressOf(build) {
    const p = build && build.progress;
    if (!p) return null;
    const files = `${count(p.files_done)}/${count(p.files_total)} files`;
    return `${files}, ${count(p.chunks_done)}/${count(p.chunks_total)} chunks`;
  }

  function renderIndexes(data) {
    const regs = new Map((data.registrations || []).map((r) => [r.name, r]));
    const builds = new Map();
    for (const b of data.builds || []) {
      const name = b.ticket && b.ticket.index;
      const seen = builds.get(name);
      if (!seen || (b.ticket.submitted_at || 0) >= (seen.ticket.submitted_at || 0)) builds.set(name, b);
    }
    const served = Array.isArray(data.indexes) ? data.indexes : [];  // when the route lists serving builds too
    const infos = new Map(served.map((i) => [i.name || i.repo || i.index, i]));
    const names = [...new Set([...regs.keys(), ...builds.keys(), ...infos.keys()])].filter(Boolean).sort();
    const rows = names.map((name) => {
      const reg = regs.get(name);
      const build = builds.get(name);
      const info = infos.get(name);
      const ticket = (build && build.ticket) || {};
      const phase = build ? build.phase + (build.error ? ": " + build.error : "") : null;
      return {
        attrs: { "data-index": name },
        cells: [
          { text: name, field: "name" },
          (reg && reg.folder) || ticket.folder || (info && info.folder),
          (reg && reg.ref) || ticket.ref,
          reg ? yes(reg.sync) : null,
          { text: commitOf(info, build, reg), field: "commit" },
          { text: freshnessOf(info, build, reg), field: "freshness" },
          { text: ticket.build || (info && info.build), field: "build" },
          { text: phase, field: "phase", cls: build && build.phase === "failed" ? "bad" : "" },
          { text: ticket.job_id, field: "job" },
          progressOf(build),
          when(ticket.submitted_at || (reg && reg.submitted_at)),
        ],
      };
    });
    const columns = ["Index", "Folder", "Ref", "Sync", "Commit", "Freshness", "Build", "Phase", "Job"];
    columns.push("Progress", "Submitted");
    put("indexes", table("indexes", columns, rows, "no index registered"));
  }

  function renderSidecars(data) {
    const rows = (data.sidecars || []).map((host) => {
      const roles = Object.entries(host.roles || {}).map(([role, r]) => {
        const gate = r.gate ? `, gate ${r.gate.verdict}` : "";
        return `${role}: ${r.eligible ? "eligible" : "not eligible"}${gate}${r.reason ? " (" + r.reason + ")" : ""}`;
      });
      return {
        attrs: { "data-host": host.agent_url },
        cells: [
          host.hostname,
          host.agent_url,
          host.transport,
          { text: yes(host.fresh), cls: host.fresh ? "ok" : "bad" },
          typeof host.last_seen_s_ago === "number" ? duration(host.last_seen_s_ago) + " ago" : "not since start",
          { text: count(host.active_requests), cls: "num" },
          roles.join("; "),
        ],
      };
    });
    const columns = ["Host", "Agent", "Transport", "Fresh", "Last seen", "Active", "Roles"];
    put("sidecars", table("sidecars", columns, rows, "no sidecar has registered"));
  }

  function renderJobs(data) {
    const rows = (data.jobs || []).map((job) => ({
      attrs: { "data-job": job.submission_id },
      cells: [
        { text: job.submission_id, field: "id" },
        {
          text: job.status + (job.error_type ? ` (${job.error_type})` : ""),
          field: "status",
          cls: job.status === "FAILED" ? "bad" : "",
        },
        job.kind,
        { text: job.index, field: "index" },
        job.build,
        job.ref,
        when(job.start_time),
        when(job.end_time),
        job.start_time && job.end_time ? duration(job.end_time - job.start_time) : null,
      ],
    }));
    const columns = ["Submission", "Status", "Kind", "Index", "Build", "Ref", "Started", "Ended", "Took"];
    put("jobs", table("jobs", columns, rows, "no job submitted"));
  }

  function renderAudit(data) {
    const rows = (data.records || []).map((r) => ({
      attrs: { "data-outcome": r.outcome },
      cells: [
        { text: show(r.time).replace("T", " ").slice(0, 19) + " UTC", field: "time" },
        { text: r.subject, field: "subject" },
        r.client_id,
        r.kind,
        r.surface,
        { text: r.action, field: "action" },
        { text: (r.indexes || []).join(", "), field: "indexes" },
        { text: r.outcome, field: "outcome", cls: r.outcome === "ok" ? "ok" : "bad" },
        { text: fixed(r.ms, 1), cls: "num" },
        { text: fixed(r.credits, 4), field: "credits", cls: "num" },
      ],
    }));
    const columns = ["Time", "Subject", "Client", "Kind", "Surface", "Action", "Indexes", "Outcome", "ms"];
    columns.push("Credits");
    put("audit", table("audit", columns, rows, "no call recorded"));
  }

  // ---- loading -------------------------------------------------------------------------------
  async function load(ids, fetcher, render) {
    const gen = generation;
    try {
      const data = await fetcher();
      if (gen === generation) render(data);
    } catch (err) {
      if (gen !== generation || (err instanceof ApiError && err.status === 401)) return;
      for (const id of ids) put(id, errorNode(err));
    }
  }

  async function refreshAll() {
    const gen = generation;
    const status = $("status");
    status.dataset.state = "loading";
    status.textContent = "loading\u2026";
    await Promise.all([
      load(["roles", "providers"], loadProviders, renderProvidersAndRoles),
      load(["gate"], () => call("GET", "gate"), renderGate),
      load(["budget", "spend"], () => call("GET", "budget"), renderBudget),
      load(["indexes"], () => call("GET", "indexes"), renderIndexes),
      load(["sidecars"], () => call("GET", "sidecars"), renderSidecars),
      load(["jobs"], () => call("GET", "jobs"), renderJobs),
      load(["audit"], () => call("GET", "audit?limit=50"), renderAudit),
    ]);
    if (gen !== generation) return;
    status.dataset.state = "ready";
    status.textContent = "updated " + when(Date.now() / 1000);
  }

  // ---- the session ---------------------------------------------------------------------------
  function showDashboard() {
    $("login").hidden = true;
    $("session").hidden = false;
    $("dashboard").hidden = false;
    buildDashboard();
    refreshAll();
  }

  function signOut(message) {
    generation += 1;
    sessionStorage.removeItem(TOKEN_KEY);
    $("dashboard").replaceChildren();
    $("dashboard").hidden = true;
    $("session").hidden = true;
    $("login").hidden = false;
    $("status").dataset.state = "signed-out";
    $("status").textContent = "";
    $("login-error").textContent = message || "";
    $("token").focus();
  }

  function signIn(event) {
    event.preventDefault();
    const input = $("token");
    const token = input.value.trim();
    input.value = "";
    if (!token) {
      $("login-error").textContent = "Enter the admin token.";
      return;
    }
    $("login-error").textContent = "";
    sessionStorage.setItem(TOKEN_KEY, token);
    showDashboard();
  }

  $("login-form").addEventListener("submit", signIn);
  $("signout").addEventListener("click", () => signOut("Signed out."));
  $("refresh").addEventListener("click", () => refreshAll());
  if (sessionStorage.getItem(TOKEN_KEY)) showDashboard();
  else $("token").focus();
})();
