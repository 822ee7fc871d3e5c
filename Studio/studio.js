/*
 * Baton Studio: every screen as each client sees it, side by side, and flows walked for real.
 * The screens come from the real /v{N}/screens endpoint and commands go to the real
 * /v{N}/command; /studio/api/ adds what the wire does not carry (the fit report per
 * component, flow graphs, lint, contract coverage). Drawing is left to renderer/baton-render.js.
 */
(function () {
  "use strict";

  const $ = (selector, root) => (root || document).querySelector(selector);
  const state = {
    config: null,
    studioToken: sessionStorage.getItem("batonStudioToken") || "",
    userTokens: new Map(),
    clients: [],
    nextClient: 1,
    screen: { name: "home", params: {} },
    graphs: new Map(),
  };

  // The reference renderer's DOM helper: one way to build elements on the page.
  const el = BatonRender.el;

  function uuid() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /** Device tokens the server issued, by device id (PROTOCOL §1: sent back with X-Device-Id). */
  const deviceTokens = new Map();

  /** Keeps the X-Device-Token a response issued for the device a request named. */
  function keepDeviceToken(requestHeaders, response) {
    const token = response.headers.get("X-Device-Token");
    if (token && requestHeaders["X-Device-Id"]) deviceTokens.set(requestHeaders["X-Device-Id"], token);
  }

  /** A GET of the studio's own API (with the studio token outside development). */
  async function api(path, headers) {
    const all = Object.assign({}, headers || {});
    if (state.studioToken) all.Authorization = "Bearer " + state.studioToken;
    const response = await fetch("/studio/api/" + path, { headers: all, cache: "no-store" });
    keepDeviceToken(all, response);
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      const error = new Error((body && body.error && body.error.message) || "HTTP " + response.status);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  function query(params) {
    const text = new URLSearchParams(params || {}).toString();
    return text ? "?" + text : "";
  }

  function parseParams(text) {
    return Object.fromEntries(new URLSearchParams((text || "").trim().replace(/^\?/, "")));
  }

  /** The placeholder drawn instead of remote images unless "Load remote images" is on. */
  function placeholderImage(url) {
    const label = (url || "").replace(/^https?:\/\//, "").split("/")[0].slice(0, 18);
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96"><rect width="96" height="96" fill="#d1d5db"/>` +
      `<text x="48" y="52" font-family="sans-serif" font-size="9" text-anchor="middle" fill="#4b5563">${label.replace(/[<&>"]/g, "")}</text></svg>`;
    return "data:image/svg+xml," + encodeURIComponent(svg);
  }

  // ---- One client: a contract version, platform, capabilities and subject --------------

  class Client {
    constructor(options) {
      this.number = state.nextClient++;
      this.contract = options.contract;
      this.platform = options.platform || "web";
      this.capabilities = new Set(options.capabilities || []);
      this.subject = options.subject || "device";
      this.customToken = "";
      this.deviceId = uuid();
      this.stack = [];
      this.log = [];
      this.build();
    }

    get label() {
      const caps = [...this.capabilities].sort().join(", ") || "no capabilities";
      return `Client ${this.number}: contract ${this.contract}, ${this.platform}, ${caps}`;
    }

    /** user:alice, device:<uuid>, or the sub of a pasted token. */
    get subjectString() {
      if (this.subject === "device") return "device:" + this.deviceId;
      if (this.subject === "token") {
        try { return "user:" + JSON.parse(atob(this.customToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/"))).sub; } catch { return null; }
      }
      return this.subject;
    }

    async userToken() {
      if (this.subject === "device") return null;
      if (this.subject === "token") return this.customToken || null;
      const user = this.subject.replace(/^user:/, "");
      if (!state.userTokens.has(user)) state.userTokens.set(user, (await api("token" + query({ user }))).token);
      return state.userTokens.get(user);
    }

    /** The headers a real app with this profile would send. */
    async headers() {
      const headers = {
        "X-Client-Platform": this.platform, "X-Client-Version": "studio",
        "X-Client-Capabilities": [...this.capabilities].sort().join(","),
      };
      const token = await this.userToken();
      if (token) {
        headers.Authorization = "Bearer " + token;
      } else {
        headers["X-Device-Id"] = this.deviceId;
        if (deviceTokens.has(this.deviceId)) headers["X-Device-Token"] = deviceTokens.get(this.deviceId);
      }
      return headers;
    }

    /** The same subject, for the studio's API (which keeps Authorization for the studio token). */
    async studioHeaders() {
      const headers = await this.headers();
      if (headers.Authorization) { headers["X-Studio-As"] = headers.Authorization; delete headers.Authorization; }
      return headers;
    }

    build() {
      const id = "client-" + this.number;
      const contracts = [];
      for (let v = state.config.contract.oldest; v <= state.config.contract.newest; v++) contracts.push(v);
      const subjects = [...state.config.demoUsers.map((u) => ["user:" + u, "user " + u]), ["device", "anonymous device"], ["token", "user token…"]];
      this.root = el("article", { class: "client", "data-client": this.number, "aria-labelledby": id + "-title" });
      this.title = el("h2", { id: id + "-title", class: "client__title" }, this.label);
      const contract = el("select", { id: id + "-contract" }, contracts.map((v) => el("option", { value: v, selected: v === this.contract }, "v" + v)));
      const platform = el("select", { id: id + "-platform" }, state.config.platforms.map((p) => el("option", { value: p, selected: p === this.platform }, p)));
      const subject = el("select", { id: id + "-subject" }, subjects.map(([value, text]) => el("option", { value, selected: value === this.subject }, text)));
      const token = el("input", { id: id + "-token", type: "password", placeholder: "Bearer token (JWT)", hidden: this.subject !== "token", autocomplete: "off" });
      const capabilities = el("fieldset", { class: "client__caps" }, el("legend", {}, "Capabilities"),
        state.config.capabilities.map((cap) => el("label", {},
          el("input", { type: "checkbox", value: cap, checked: this.capabilities.has(cap), "data-capability": cap }), " " + cap)));
      const form = el("form", { class: "client__config", "aria-label": "Client " + this.number + " settings" },
        el("label", { for: id + "-contract" }, "Contract"), contract,
        el("label", { for: id + "-platform" }, "Platform"), platform,
        el("label", { for: id + "-subject" }, "Subject"), subject, token,
        capabilities,
        el("button", { type: "button", class: "client__remove", onclick: () => removeClient(this), "aria-label": "Remove client " + this.number }, "Remove"));
      form.addEventListener("change", () => {
        this.contract = Number(contract.value);
        this.platform = platform.value;
        this.subject = subject.value;
        token.hidden = this.subject !== "token";
        this.customToken = token.value.trim();
        this.capabilities = new Set([...capabilities.querySelectorAll("input:checked")].map((box) => box.value));
        this.title.textContent = this.label;
        this.open(state.screen.name, state.screen.params);
      });
      form.addEventListener("submit", (event) => event.preventDefault());

      this.back = el("button", { type: "button", class: "device__back", onclick: () => this.goBack(), "aria-label": "Back" }, "‹ Back");
      this.reload = el("button", { type: "button", onclick: () => this.show(), "aria-label": "Reload the screen" }, "↻");
      this.where = el("span", { class: "device__where" });
      this.screenArea = el("div", { class: "device__screen", tabindex: "-1" });
      this.sheet = el("div", { class: "device__sheet", hidden: true });
      this.toasts = el("div", { class: "device__toasts", "aria-live": "polite" });
      this.device = el("div", { class: "device", "aria-label": "Rendering for client " + this.number, role: "region" },
        el("div", { class: "device__bar" }, this.back, this.where, this.reload), this.screenArea, this.sheet, this.toasts);
      this.marks = el("section", { class: "marks", "aria-label": "Fit report for client " + this.number });
      this.wire = el("section", { class: "wire", "aria-label": "Requests and responses of client " + this.number });
      this.root.append(this.title, form, el("div", { class: "client__body" }, this.device, el("div", { class: "client__side" }, this.marks, this.wire)));
    }

    host() {
      return {
        command: (url, body) => this.command(url, body),
        navigate: (screen, params) => { this.stack.push({ kind: "named", name: screen, params: params || {} }); return this.show(); },
        close: () => this.goBack(),
        openUrl: (url) => { window.open(url, "_blank", "noopener"); },
        share: ({ text, url }) => this.toast("Share: " + [text, url].filter(Boolean).join(" "), "info"),
        askBarcode: (title) => this.askBarcode(title),
        imageURL: (url) => ($("#load-images").checked ? url : placeholderImage(url)),
        error: (error) => this.toast(String(error && error.message || error), "error"),
      };
    }

    open(name, params) {
      this.stack = [{ kind: "named", name, params: params || {} }];
      this.hideSheet();
      return this.show();
    }

    goBack() {
      this.hideSheet();
      if (this.stack.length > 1) this.stack.pop();
      return this.show();
    }

    /** Pops the screens a flow pushed, back to the named screen behind them. */
    finishFlow() {
      while (this.stack.length > 1 && this.stack[this.stack.length - 1].kind === "shown") this.stack.pop();
    }

    async show() {
      const top = this.stack[this.stack.length - 1];
      if (!top) return;
      this.back.disabled = this.stack.length < 2;
      if (top.kind === "shown") {
        this.where.textContent = "flow screen " + (top.screen.id || "");
        this.draw(top.screen, top.marks || null, top.marksSource);
        return;
      }
      this.where.textContent = top.name + query(top.params);
      const entry = await this.exchange("GET", `/v${this.contract}/screens/${encodeURIComponent(top.name)}${query(top.params)}`);
      if (!entry || entry.status !== 200 || !entry.json) {
        this.screenArea.replaceChildren(el("p", { class: "device__problem", role: "alert" },
          entry && entry.json && entry.json.error ? entry.json.error.message : "The screen could not be loaded."));
        this.marks.replaceChildren();
        return;
      }
      let fit = null;
      try {
        fit = await api(`fit/v${this.contract}/${encodeURIComponent(top.name)}${query(top.params)}`, await this.studioHeaders());
      } catch (error) {
        this.marks.replaceChildren(el("p", { role: "alert" }, "Fit report unavailable: " + error.message));
      }
      this.draw(entry.json, fit ? fit.marks : null);
    }

    /** Draws a screen with the renderer, then the studio's marks from the fit report. */
    draw(screen, marks, source) {
      // Keyboard users keep their place: focus that was on the old screen moves to the new one.
      const refocus = this.screenArea.contains(document.activeElement) || this.refocus;
      this.refocus = false;
      const rendered = BatonRender.screen(screen, this.host());
      this.screenArea.replaceChildren(rendered);
      if (refocus) this.screenArea.focus({ preventScroll: true });
      this.marks.replaceChildren(el("h3", {}, "Fit report"));
      if (source) this.marks.append(el("p", { class: "marks__none" }, source));
      if (!marks) {
        this.marks.append(el("p", { class: "marks__none" }, "Looking up the flow state of this screen…"));
        return;
      }
      if (!marks.length) {
        this.marks.append(el("p", { class: "marks__none" }, "Rendered as designed: nothing replaced or omitted."));
        return;
      }
      // The list counts repeats ("artworkRow → detailRow (contract 1) ×6"); the rendering marks each one.
      const counts = new Map();
      for (const mark of marks) counts.set(mark.note, { mark, count: (counts.get(mark.note) || { count: 0 }).count + 1 });
      const list = el("ul", { class: "marks__list" }, [...counts.values()].map(({ mark, count }) =>
        el("li", { class: "marks__item marks__item--" + mark.status }, mark.note, count > 1 ? ` ×${count}` : "")));
      const placed = new Set();
      for (const mark of marks) {
        if (mark.status === "omitted") {
          // Where the component would have been, when its section is on screen.
          const section = mark.section !== undefined && rendered.querySelector(`[data-section-id="${CSS.escape(mark.section)}"]`);
          if (!section) continue;
          const ghost = el("div", { class: "studio-mark studio-mark--omitted studio-ghost", role: "note" }, mark.note);
          const after = mark.after && section.querySelector(`[data-component-id="${CSS.escape(mark.after)}"]`);
          if (after) after.after(ghost);
          else {
            const heading = section.querySelector(".baton-section__heading");
            if (heading) heading.after(ghost); else section.prepend(ghost);
          }
          placed.add(mark);
          continue;
        }
        let target = null;
        if (mark.id.startsWith("menu:")) {
          const title = mark.id.slice(5);
          target = [...rendered.querySelectorAll(".baton-menu__item")].find((item) => item.textContent === title) || null;
        } else {
          target = rendered.querySelector(`[data-component-id="${CSS.escape(mark.id)}"]`);
        }
        if (target) {
          target.classList.add("studio-marked");
          target.before(el("span", { class: "studio-mark studio-mark--" + mark.status, role: "note" }, mark.note));
        }
      }
      const omitted = marks.filter((m) => m.status === "omitted" && !placed.has(m));
      if (omitted.length) {
        rendered.append(el("aside", { class: "studio-omitted", "aria-label": "Not shown to this client" },
          el("strong", {}, "Not shown to this client"), el("ul", {}, omitted.map((m) => el("li", { class: "studio-mark studio-mark--omitted" }, m.note)))));
      }
      this.marks.append(list);
    }

    /** One real request, logged beside the rendering with its headers and body. */
    async exchange(method, path, body) {
      let headers;
      try { headers = await this.headers(); } catch (error) { this.toast(error.message, "error"); return null; }
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const started = performance.now();
      let response;
      try {
        response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
        keepDeviceToken(headers, response);
      } catch (error) {
        this.toast("Request failed: " + error.message, "error");
        return null;
      }
      const text = await response.text();
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      const entry = {
        method, path, requestHeaders: headers, requestBody: body, status: response.status,
        responseHeaders: [...response.headers.entries()], text, json, ms: Math.round(performance.now() - started),
      };
      this.log.unshift(entry);
      this.log.length = Math.min(this.log.length, 12);
      this.drawLog();
      return entry;
    }

    drawLog() {
      const pretty = (value) => (value === undefined ? "" : JSON.stringify(value, null, 2));
      const shown = (headers) => Object.entries(headers).map(([k, v]) => `${k}: ${k === "Authorization" ? v.slice(0, 24) + "…" : v}`).join("\n");
      this.wire.replaceChildren(el("h3", {}, "Wire"), ...this.log.map((entry, index) => {
        const replay = entry.responseHeaders.find(([k]) => k === "idempotent-replay");
        const etag = entry.responseHeaders.find(([k]) => k === "etag");
        return el("details", { class: "exchange", open: index === 0 },
          el("summary", {}, `${entry.method} ${entry.path} → ${entry.status}`, entry.json && entry.json.type ? ` ${entry.json.type}` : "",
            replay ? " (Idempotent-Replay)" : "", etag ? ` ETag ${etag[1]}` : "", ` · ${entry.ms} ms`),
          // Exactly once (PROTOCOL §3): the identical command again gets the stored reply, marked as a replay.
          entry.method === "POST" ? el("button", {
            type: "button", class: "exchange__again", onclick: () => this.command(entry.path, entry.requestBody),
          }, "Send again (identical request)") : null,
          el("div", { class: "exchange__grid" },
            el("div", {}, el("h4", {}, "Request"), el("pre", {}, `${entry.method} ${entry.path}\n${shown(entry.requestHeaders)}`
              + (entry.requestBody !== undefined ? "\n\n" + pretty(entry.requestBody) : ""))),
            el("div", {}, el("h4", {}, "Response"), el("pre", {}, `HTTP ${entry.status}\n${entry.responseHeaders.map(([k, v]) => `${k}: ${v}`).join("\n")}\n\n`
              + (entry.json ? pretty(entry.json) : entry.text)))));
      }));
    }

    /** Runs a command for real and does what its reply says (PROTOCOL §3). */
    async command(url, body) {
      this.toasts.replaceChildren();
      const entry = await this.exchange("POST", url, body);
      if (!entry) return;
      const reply = entry.json;
      if (entry.status !== 200 || !reply) {
        this.hideSheet();
        this.toast((reply && reply.error && reply.error.message) || "HTTP " + entry.status, "error");
      } else {
        await this.handle(reply);
      }
      await this.updateWalk();
    }

    async handle(reply) {
      switch (reply.type) {
        case "done":
          this.hideSheet();
          this.toast(reply.message || "Done", "done");
          this.finishFlow();
          await this.show();
          break;
        case "refresh":
          this.hideSheet();
          this.toast(reply.message || "The screen was out of date: refreshed", "info");
          this.finishFlow();
          await this.show();
          break;
        case "input":
          this.showSheet(BatonRender.input(reply, this.host()));
          break;
        case "screen": {
          this.hideSheet();
          const top = this.stack[this.stack.length - 1];
          if (reply.presentation === "replace" && top && top.kind === "shown") this.stack.pop();
          this.stack.push({ kind: "shown", screen: reply.screen, presentation: reply.presentation });
          await this.show();
          break;
        }
        case "error":
          this.hideSheet();
          this.toast(reply.message || "Something went wrong", "error", reply.retry);
          this.finishFlow();
          await this.show();
          break;
        default:
          this.toast("Unknown reply type " + reply.type, "error");
      }
    }

    showSheet(content) {
      this.sheet.replaceChildren(content);
      this.sheet.hidden = false;
      const first = content.querySelector("input, select, button");
      if (first) first.focus();
    }

    hideSheet() {
      if (this.sheet.contains(document.activeElement)) this.refocus = true;
      this.sheet.hidden = true;
      this.sheet.replaceChildren();
    }

    /** The web has no scanner: a sheet asks for the code as text. */
    askBarcode(title) {
      return new Promise((resolve) => {
        const fieldId = `client-${this.number}-barcode`;
        const field = el("input", { id: fieldId, type: "text", autocomplete: "off" });
        const form = el("form", { class: "baton-input" }, el("h2", { class: "baton-input__title" }, title || "Scan a barcode"),
          el("label", { for: fieldId, class: "baton-field__label" }, "Barcode (typed)"), field,
          el("div", { class: "baton-input__buttons" },
            el("button", { type: "button", class: "baton-button baton-button--secondary", onclick: () => { this.hideSheet(); resolve(null); } }, "Cancel"),
            el("button", { type: "submit", class: "baton-button baton-button--primary" }, "Use this code")));
        form.addEventListener("submit", (event) => { event.preventDefault(); this.hideSheet(); resolve(field.value); });
        form.addEventListener("keydown", (event) => { if (event.key === "Escape") { this.hideSheet(); resolve(null); } });
        this.showSheet(form);
      });
    }

    toast(message, kind, retry) {
      const toast = el("div", { class: "toast toast--" + kind, role: kind === "error" ? "alert" : "status" }, message);
      if (retry) toast.append(" ", el("button", { type: "button", onclick: () => { toast.remove(); BatonRender.perform(retry, this.host()); } }, retry.title || "Retry"));
      toast.append(" ", el("button", { type: "button", class: "toast__close", "aria-label": "Dismiss", onclick: () => toast.remove() }, "×"));
      this.toasts.append(toast);
      setTimeout(() => toast.remove(), kind === "error" ? 12000 : 6000);
    }

    /** After a command: which flow and state the subject's latest session is in. */
    async updateWalk() {
      const subject = this.subjectString;
      if (!subject) return;
      try {
        const { sessions } = await api("sessions" + query({ subject }));
        if (!sessions.length) return;
        const session = sessions[0];
        await showWalk(this, session);
        // A flow's screen: its marks come from the state's template (sample values).
        const top = this.stack[this.stack.length - 1];
        if (top && top.kind === "shown" && session.status === "active" && !top.marks) {
          const fit = await api(`state-fit/v${this.contract}/${encodeURIComponent(session.flow)}/${encodeURIComponent(session.state)}`,
            await this.studioHeaders());
          if (fit.marks && this.stack[this.stack.length - 1] === top) {
            top.marks = fit.marks;
            top.marksSource = `Flow ${session.flow}, state ${session.state}: marks from the state's screen template (sample values).`;
            this.draw(top.screen, top.marks, top.marksSource);
          }
        }
      } catch (error) {
        console.warn("session lookup failed", error);
      }
    }
  }

  function addClient(options) {
    const client = new Client(options);
    state.clients.push(client);
    $("#clients").append(client.root);
    client.open(state.screen.name, state.screen.params).catch((error) => client.toast(error.message, "error"));
    return client;
  }

  function removeClient(client) {
    state.clients = state.clients.filter((c) => c !== client);
    client.root.remove();
    $("#add-client").focus();
  }

  // ---- Flow graphs -----------------------------------------------------------------------

  async function graph(flow) {
    if (!state.graphs.has(flow)) state.graphs.set(flow, await api("graph/" + encodeURIComponent(flow)));
    return state.graphs.get(flow);
  }

  /** Draws a flow graph into `target`, the state `current` highlighted. */
  async function drawGraph(target, flow, current) {
    const data = await graph(flow);
    const caption = el("p", { class: "graph__caption" }, `Flow ${flow}`, current ? ` — current state: ${current}` : "");
    if (data.svg) {
      const holder = el("div", { class: "graph__svg" });
      holder.innerHTML = data.svg;
      const svg = holder.querySelector("svg");
      if (svg) { svg.setAttribute("role", "img"); svg.setAttribute("aria-label", `State graph of ${flow}`); }
      for (const node of holder.querySelectorAll("g.node")) {
        const title = node.querySelector("title");
        if (title && title.textContent === current) {
          node.classList.add("graph__current");
          for (const shape of node.querySelectorAll("path, polygon, ellipse")) shape.setAttribute("fill", "#ffd54f");
        }
      }
      target.replaceChildren(caption, holder);
    } else {
      target.replaceChildren(caption, el("p", { class: "graph__message", role: "note" }, data.message || "Graphviz is not installed."),
        el("pre", { class: "graph__mermaid" }, data.mermaid + (current ? `\n%% current state: ${current}` : "")));
    }
  }

  async function showWalk(client, session) {
    const target = $("#walk-graph");
    target.hidden = false;
    await drawGraph(target, session.flow, session.state);
    target.prepend(el("h2", {}, `Client ${client.number} walks ${session.flow}: ${session.state} (${session.status})`));
  }

  // ---- Lint and coverage ----------------------------------------------------------------

  async function showLint() {
    const target = $("#lint");
    target.replaceChildren(el("p", {}, "Linting…"));
    try {
      const lint = await api("lint");
      const rows = lint.diagnostics.map((d) => el("tr", { class: "lint--" + d.severity },
        el("td", {}, d.severity), el("td", {}, `${d.file}:${d.line}:${d.column}`), el("td", {}, d.message)));
      target.replaceChildren(
        el("p", {}, `${lint.directory} (${lint.source}): ${lint.errors} error(s), ${lint.diagnostics.length - lint.errors} warning(s).`),
        rows.length ? el("table", { class: "table" }, el("caption", {}, "Lint diagnostics"),
          el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Severity"), el("th", { scope: "col" }, "Where"), el("th", { scope: "col" }, "Message"))),
          el("tbody", {}, rows)) : el("p", { class: "lint--clean" }, "No findings: the bundle lints clean."));
    } catch (error) {
      target.replaceChildren(el("p", { role: "alert" }, error.message));
    }
  }

  async function showCoverage() {
    const target = $("#coverage");
    try {
      const coverage = await api("coverage");
      const table = (caption, specs) => el("table", { class: "table coverage" }, el("caption", {}, caption),
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Type"), el("th", { scope: "col" }, "Needs"),
          coverage.versions.map((v) => el("th", { scope: "col" }, "Contract " + v)))),
        el("tbody", {}, specs.map((spec) => el("tr", {},
          el("th", { scope: "row", title: spec.description || "" }, spec.name),
          el("td", {}, ["since " + spec.since, ...spec.capabilities].join(", ")),
          coverage.versions.map((v) => {
            if (spec.since > v) return el("td", { class: "coverage--fallback" }, spec.fallback);
            if (spec.capabilities.length) return el("td", { class: "coverage--capability" }, `✓ with ${spec.capabilities.join(", ")}; else ${spec.fallback}`);
            return el("td", { class: "coverage--native" }, "✓");
          })))));
      target.replaceChildren(table("Components per contract version", coverage.components), table("Actions per contract version", coverage.actions),
        el("h3", {}, "What today's screens lose, per client"),
        el("ul", { class: "shortfalls" }, coverage.shortfalls.map((s) => el("li", {},
          el("strong", {}, `Contract ${s.contract}, ${s.capabilities.length ? s.capabilities.join(", ") : "no capabilities"}: `),
          s.shortfalls.length ? el("ul", {}, s.shortfalls.map((line) => el("li", {}, line))) : "everything renders as designed"))));
    } catch (error) {
      target.replaceChildren(el("p", { role: "alert" }, error.message));
    }
  }

  // ---- Page -------------------------------------------------------------------------------

  function selectTab(tab) {
    for (const other of document.querySelectorAll('[role="tab"]')) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      $("#" + other.getAttribute("aria-controls")).hidden = !selected;
    }
    tab.focus();
    if (tab.id === "tab-lint") showLint();
    if (tab.id === "tab-coverage") showCoverage();
    if (tab.id === "tab-flow") showFlow();
  }

  function setUpTabs() {
    const tabs = [...document.querySelectorAll('[role="tab"]')];
    tabs.forEach((tab, index) => {
      tab.addEventListener("click", () => selectTab(tab));
      tab.addEventListener("keydown", (event) => {
        const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
        if (step) { event.preventDefault(); selectTab(tabs[(index + step + tabs.length) % tabs.length]); }
        if (event.key === "Home") { event.preventDefault(); selectTab(tabs[0]); }
        if (event.key === "End") { event.preventDefault(); selectTab(tabs[tabs.length - 1]); }
      });
    });
  }

  function showScreen(name, params) {
    state.screen = { name, params: params || {} };
    $("#screen-name").value = name;
    $("#screen-params").value = new URLSearchParams(params || {}).toString();
    for (const item of document.querySelectorAll("#screens button")) item.setAttribute("aria-current", String(item.dataset.screen === name));
    selectTab($("#tab-clients"));
    return Promise.all(state.clients.map((client) => client.open(name, params).catch((error) => client.toast(error.message, "error"))));
  }

  function flowParamsForm(flow) {
    const holder = $("#flow-params");
    holder.replaceChildren(...flow.params.map((param) => [
      el("label", { for: "flow-param-" + param.name }, param.name + (param.required ? " *" : "")),
      el("input", { id: "flow-param-" + param.name, "data-param": param.name, placeholder: param.pattern || "", value: param.name === "location" ? "UT-0001" : "" }),
    ]).flat());
  }

  async function showFlow() {
    const flow = state.config.flows.find((f) => f.name === $("#flow-name").value);
    if (!flow) return;
    flowParamsForm(flow);
    try { await drawGraph($("#flow-graph"), flow.name, null); } catch (error) { $("#flow-graph").replaceChildren(el("p", { role: "alert" }, error.message)); }
  }

  async function startFlow(event) {
    event.preventDefault();
    const flow = $("#flow-name").value;
    const params = {};
    for (const input of document.querySelectorAll("#flow-params input")) if (input.value) params[input.dataset.param] = input.value;
    selectTab($("#tab-clients"));
    for (const client of state.clients) {
      try {
        const start = await api(`start/v${client.contract}/${encodeURIComponent(flow)}${query(params)}`, await client.studioHeaders());
        await client.command(start.url, { payload: start.payload });
      } catch (error) {
        client.toast(`Cannot start ${flow}: ${error.message}`, "error");
      }
    }
  }

  function fillBundle() {
    const { config } = state;
    $("#mode").textContent = config.mode === "development" ? "development: open on this address, demo users" : "studio token";
    $("#screens").replaceChildren(...config.screens.map((screen) => el("li", {},
      el("button", { type: "button", "data-screen": screen.name, onclick: () => showScreen(screen.name, {}) },
        screen.name, screen.params.length ? el("span", { class: "muted" }, " ?" + screen.params.map((p) => p.name).join("&")) : null))));
    $("#flows").replaceChildren(...config.flows.map((flow) => el("li", {},
      el("button", { type: "button", "data-flow": flow.name, title: flow.title || "", onclick: () => { $("#flow-name").value = flow.name; selectTab($("#tab-flow")); } }, flow.name))));
    $("#screen-name").replaceChildren(...config.screens.map((s) => el("option", { value: s.name }, s.name)));
    $("#flow-name").replaceChildren(...config.flows.map((f) => el("option", { value: f.name }, f.name)));
    $("#screen-name").value = state.screen.name;
  }

  async function boot() {
    setUpTabs();
    $("#studio-token").value = state.studioToken;
    $("#studio-token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.studioToken = $("#studio-token").value.trim();
      sessionStorage.setItem("batonStudioToken", state.studioToken);
      location.reload();
    });
    try {
      state.config = await api("config");
    } catch (error) {
      $("#studio-token-form").hidden = false;
      $("#mode").textContent = error.status === 401 || error.status === 403 ? "needs a studio token: " + error.message : error.message;
      $("#studio-token").focus();
      return;
    }
    if (state.config.mode !== "development") $("#studio-token-form").hidden = false;
    const hash = new URLSearchParams(location.hash.slice(1));
    state.screen = { name: hash.get("screen") || (state.config.screens.some((s) => s.name === "home") ? "home" : state.config.screens[0].name), params: {} };
    fillBundle();
    $("#screen-form").addEventListener("submit", (event) => {
      event.preventDefault();
      showScreen($("#screen-name").value, parseParams($("#screen-params").value));
    });
    $("#flow-form").addEventListener("submit", startFlow);
    $("#flow-name").addEventListener("change", showFlow);
    $("#load-images").addEventListener("change", () => state.clients.forEach((c) => c.show()));
    const newest = state.config.contract.newest;
    const oldest = state.config.contract.oldest;
    const subject = state.config.demoUsers.length ? "user:" + state.config.demoUsers[0] : "device";
    $("#add-client").addEventListener("click", () => addClient({ contract: newest, platform: "web", capabilities: [], subject }).root.querySelector("select").focus());
    addClient({ contract: newest, platform: "web", capabilities: state.config.capabilities, subject });
    addClient({ contract: oldest, platform: "web", capabilities: [], subject });
    for (const item of document.querySelectorAll("#screens button")) item.setAttribute("aria-current", String(item.dataset.screen === state.screen.name));
  }

  boot();
})();
