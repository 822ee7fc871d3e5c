/*
 * Baton reference web renderer: draws Baton's server-driven screens (PROTOCOL §2) with the
 * DOM, for the `web` platform. Plain JavaScript, no dependencies, no build step: copy this
 * file (and baton-render.css) into any web client.
 *
 * Every component and action type of Flows/contract.yaml is registered below with
 * `component("type", …)` / `action("type", …)`; a test fails when the contract gains a type
 * this file does not render (Tests/BatonServerTests/StudioTests.swift).
 *
 *   const element = BatonRender.screen(screenJSON, host);
 *   const form = BatonRender.input(inputReplyJSON, host);
 *
 * `host` is what the renderer asks of its application:
 *   host.command(url, body)        POST body ({payload, input?}) to url; the app handles the reply
 *   host.navigate(screen, params)  show another screen (GET /v{N}/screens/{screen}?params)
 *   host.close()                   close the current screen
 *   host.openUrl(url)              open a URL (already allowlisted by the server)
 *   host.share({text, url})        share text and/or a URL
 *   host.imageURL(url)             optional: the URL to load for an image (e.g. a placeholder)
 * Components the client cannot render never arrive: the server fits each screen to the
 * contract version in the path and the capabilities in X-Client-Capabilities.
 */
(function (global) {
  "use strict";

  const components = Object.create(null);
  const actions = Object.create(null);

  /** Registers the renderer of a component type: (component, host) => Element. */
  function component(type, render) { components[type] = render; }
  /** Registers what performing an action type does: (action, host, input) => Promise. */
  function action(type, perform) { actions[type] = perform; }

  // ---- DOM helpers -------------------------------------------------------------------

  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function imageSource(host, url) {
    return host && typeof host.imageURL === "function" ? host.imageURL(url) : url;
  }

  /** Runs an action; `input` is the answer to an input request or a field's value. */
  function perform(actionJSON, host, input) {
    const run = actionJSON && actions[actionJSON.type];
    if (!run) return Promise.reject(new Error("this renderer cannot perform the action " + (actionJSON && actionJSON.type)));
    return Promise.resolve(run(actionJSON, host, input));
  }

  /** A tappable element for a component with an action (a real button: keyboard works). */
  function tappable(tag, attributes, actionJSON, host, children) {
    if (!actionJSON) return el(tag === "button" ? "div" : tag, attributes, children);
    const label = actionJSON.title ? { title: actionJSON.title } : {};
    return el("button", Object.assign({ type: "button" }, attributes, label, {
      onclick: (event) => { event.preventDefault(); perform(actionJSON, host).catch(host.error || console.warn); },
    }), children);
  }

  function base(c, extra) {
    return Object.assign({ "data-component-id": c.id, "data-component-type": c.type }, extra || {});
  }

  /** Renders one component; an unknown type (never sent by a fitting server) is skipped. */
  function renderComponent(c, host) {
    const render = c && components[c.type];
    if (!render) return null;
    return render(c, host);
  }

  function renderChildren(list, host) {
    return (list || []).map((child) => renderComponent(child, host)).filter(Boolean);
  }

  // ---- Components (Flows/contract.yaml) ------------------------------------------------

  component("text", (c) => el("p", base(c, { class: "baton-text baton-text--" + (c.style || "body") }), c.text));

  component("detailRow", (c, host) => tappable("div", base(c, { class: "baton-row baton-detail-row" }), c.action, host, [
    c.image ? el("img", { class: "baton-row__image", src: imageSource(host, c.image), alt: "" }) : null,
    el("span", { class: "baton-row__text" },
      el("span", { class: "baton-row__title" }, c.title),
      c.subtitle ? el("span", { class: "baton-row__subtitle" }, c.subtitle) : null),
    c.accessory && c.accessory !== "none"
      ? el("span", { class: "baton-row__accessory", "aria-hidden": "true" }, c.accessory === "check" ? "✓" : "›") : null,
  ]));

  component("button", (c, host) => tappable("button", base(c, { class: "baton-button baton-button--" + (c.style || "primary") }), c.action, host, [c.title]));

  /** A labelled text field; with an action, submitting posts {"text": value} (or {"barcode"}). */
  function textEntry(c, host, options) {
    const inputId = "baton-field-" + Math.random().toString(36).slice(2, 10);
    const field = el("input", {
      id: inputId, class: "baton-field__input", type: options.keyboard === "email" ? "email" : "text",
      inputmode: options.keyboard === "number" ? "numeric" : options.keyboard === "ascii" ? "latin" : undefined,
      placeholder: options.placeholder, value: options.value, autocomplete: "off", spellcheck: "false",
    });
    const submit = () => {
      const value = field.value;
      return perform(c.action, host, options.inputKey === "barcode" ? { barcode: value } : { text: value }).catch(host.error || console.warn);
    };
    const form = el("form", base(c, { class: "baton-field" + (options.extraClass ? " " + options.extraClass : "") }),
      options.label ? el("label", { for: inputId, class: "baton-field__label" }, options.label) : null,
      options.prompt ? el("p", { class: "baton-field__prompt" }, options.prompt) : null,
      field,
      c.action ? el("button", { type: "submit", class: "baton-button baton-button--primary" }, c.action.title || "OK") : null);
    if (!options.label) field.setAttribute("aria-label", options.placeholder || c.id);
    form.addEventListener("submit", (event) => { event.preventDefault(); if (c.action) submit(); });
    return form;
  }

  component("textField", (c, host) => textEntry(c, host, {
    label: c.label, placeholder: c.placeholder, value: c.value, keyboard: c.keyboard, inputKey: "text",
  }));

  component("header", (c) => el("header", base(c, { class: "baton-header" }),
    el("h2", { class: "baton-header__title" }, c.title),
    c.subtitle ? el("p", { class: "baton-header__subtitle" }, c.subtitle) : null));

  component("list", (c, host) => el("section", base(c, { class: "baton-list" }),
    c.title ? el("h3", { class: "baton-list__title" }, c.title) : null,
    el("div", { class: "baton-list__items", role: "list" }, renderChildren(c.components, host).map((child) => el("div", { role: "listitem" }, child)))));

  component("image", (c, host) => el("img", base(c, {
    class: "baton-image baton-image--" + (c.aspectRatio || "wide"), src: imageSource(host, c.url), alt: c.alt || "",
  })));

  component("spacer", (c) => el("div", base(c, { class: "baton-spacer baton-spacer--" + (c.size || "medium"), "aria-hidden": "true" })));

  component("artworkRow", (c, host) => tappable("div", base(c, { class: "baton-row baton-artwork-row" }), c.action, host, [
    el("img", { class: "baton-row__artwork", src: imageSource(host, c.artwork), alt: "" }),
    el("span", { class: "baton-row__text" },
      el("span", { class: "baton-row__title" }, c.title),
      c.subtitle ? el("span", { class: "baton-row__subtitle" }, c.subtitle) : null),
  ]));

  component("artworkHeader", (c, host) => el("header", base(c, { class: "baton-header baton-artwork-header" }),
    el("img", { class: "baton-artwork-header__artwork", src: imageSource(host, c.artwork), alt: "" }),
    el("div", {},
      el("h2", { class: "baton-header__title" }, c.title),
      c.subtitle ? el("p", { class: "baton-header__subtitle" }, c.subtitle) : null)));

  component("carousel", (c, host) => el("section", base(c, { class: "baton-carousel" }),
    c.title ? el("h3", { class: "baton-list__title" }, c.title) : null,
    el("div", { class: "baton-carousel__items", role: "list", tabindex: "0", "aria-label": c.title || "carousel" },
      renderChildren(c.items, host).map((child) => el("div", { role: "listitem", class: "baton-carousel__item" }, child)))));

  component("badge", (c) => el("span", base(c, { class: "baton-badge baton-badge--" + (c.style || "neutral") }), c.text));

  // The web has no camera scanner here: the code is typed, and posted as {"barcode"}.
  component("barcodeScanner", (c, host) => textEntry(c, host, {
    label: c.title, prompt: null, placeholder: c.prompt, keyboard: "ascii", inputKey: "barcode", extraClass: "baton-scanner",
  }));

  component("richText", (c) => {
    const node = el("div", base(c, { class: "baton-rich-text" }));
    node.append(...markdown(c.markdown || c.text || ""));
    return node;
  });

  /** The small Markdown subset of richText: paragraphs, **bold**, *italic*, `code`, [links](https://…). */
  function markdown(source) {
    return String(source).split(/\n{2,}/).map((paragraph) => {
      const p = el("p");
      const pattern = /(\*\*[^*]+\*\*|\*[^*]+\*|`[^`]+`|\[[^\]]+\]\(https?:[^)\s]+\))/g;
      let last = 0;
      for (const match of paragraph.matchAll(pattern)) {
        p.append(paragraph.slice(last, match.index));
        const token = match[0];
        if (token.startsWith("**")) p.append(el("strong", {}, token.slice(2, -2)));
        else if (token.startsWith("*")) p.append(el("em", {}, token.slice(1, -1)));
        else if (token.startsWith("`")) p.append(el("code", {}, token.slice(1, -1)));
        else {
          const [, text, href] = token.match(/^\[([^\]]+)\]\(([^)]+)\)$/);
          p.append(el("a", { href, rel: "noopener noreferrer", target: "_blank" }, text));
        }
        last = match.index + token.length;
      }
      p.append(paragraph.slice(last));
      return p;
    });
  }

  // ---- Actions (Flows/contract.yaml) ---------------------------------------------------

  function post(a, host, input) {
    const body = { payload: a.payload };
    if (input !== undefined && input !== null) body.input = input;
    return host.command(a.url, body);
  }

  action("command", post);
  action("startFlow", post);
  action("openUrl", (a, host) => host.openUrl(a.url));
  action("navigate", (a, host) => host.navigate(a.screen, a.params || {}));
  action("close", (a, host) => host.close());
  action("share", (a, host) => host.share({ text: a.text, url: a.url }));
  // No camera on the web: ask for the code as text, post it as {"barcode"}.
  action("scanBarcode", (a, host, input) => {
    if (input) return post(a, host, input);
    const code = typeof host.askBarcode === "function" ? host.askBarcode(a.title) : global.prompt(a.title || "Barcode");
    return Promise.resolve(code).then((value) => (value ? post(a, host, { barcode: value }) : undefined));
  });

  // ---- Screens and input requests ------------------------------------------------------

  /** A componentScreen: header, sections with headings, and the menu (secondaryButtons). */
  function screen(s, host) {
    const root = el("div", { class: "baton-screen", "data-screen-id": s.id });
    if (s.title) root.append(el("h1", { class: "baton-screen__title" }, s.title));
    if (s.header) { const header = renderComponent(s.header, host); if (header) root.append(header); }
    for (const section of s.sections || []) {
      const headingId = section.heading ? "baton-section-" + Math.random().toString(36).slice(2, 10) : undefined;
      root.append(el("section", { class: "baton-section", "data-section-id": section.id, "aria-labelledby": headingId },
        section.heading ? el("h3", { id: headingId, class: "baton-section__heading" }, section.heading.title) : null,
        renderChildren(section.components, host)));
    }
    if ((s.secondaryButtons || []).length) {
      root.append(el("nav", { class: "baton-menu", "aria-label": "More actions" },
        s.secondaryButtons.map((item) => el("button", {
          type: "button", class: "baton-menu__item",
          onclick: () => perform(item.action, host).catch(host.error || console.warn),
        }, item.title || (item.action && item.action.title) || "…"))));
    }
    return root;
  }

  /** An input request (`{"type":"input"}`): a form that answers with submit or cancel. */
  function input(reply, host) {
    const spec = reply.input || {};
    const formId = "baton-input-" + Math.random().toString(36).slice(2, 10);
    const form = el("form", { class: "baton-input", "aria-labelledby": formId + "-title", novalidate: true });
    form.append(el("h2", { id: formId + "-title", class: "baton-input__title" }, reply.title || "Input"));
    if (reply.message) form.append(el("p", { class: "baton-input__message" }, reply.message));
    if (reply.error) form.append(el("p", { class: "baton-input__error", role: "alert" }, reply.error));
    let read;
    if (spec.kind === "choice") {
      const group = el("fieldset", { class: "baton-input__choices" }, el("legend", { class: "baton-visually-hidden" }, reply.title || "Choose"));
      const type = spec.multiple ? "checkbox" : "radio";
      (spec.options || []).forEach((option, index) => {
        const optionId = formId + "-o" + index;
        group.append(el("div", { class: "baton-input__choice" },
          el("input", { type, id: optionId, name: formId, value: option.id, checked: index === 0 && !spec.multiple }),
          el("label", { for: optionId }, option.title, option.subtitle ? el("span", { class: "baton-input__subtitle" }, " — " + option.subtitle) : null)));
      });
      form.append(group);
      read = () => {
        const checked = [...group.querySelectorAll("input:checked")].map((box) => box.value);
        return spec.multiple ? { choices: checked } : { choice: checked[0] };
      };
    } else {
      const field = el("input", {
        id: formId + "-text", type: "text", class: "baton-field__input", placeholder: spec.placeholder, value: spec.value || "",
        minlength: spec.minLength, maxlength: spec.maxLength, autocomplete: "off",
      });
      form.append(el("label", { for: formId + "-text", class: "baton-field__label" }, spec.label || reply.title || "Text"), field);
      read = () => (spec.kind === "barcode" ? { barcode: field.value } : { text: field.value });
    }
    const buttons = el("div", { class: "baton-input__buttons" });
    if (reply.cancel) {
      buttons.append(el("button", {
        type: "button", class: "baton-button baton-button--secondary",
        onclick: () => perform(reply.cancel, host).catch(host.error || console.warn),
      }, reply.cancel.title || "Cancel"));
    }
    if (reply.submit) buttons.append(el("button", { type: "submit", class: "baton-button baton-button--primary" }, reply.submit.title || "OK"));
    form.append(buttons);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (reply.submit) perform(reply.submit, host, read()).catch(host.error || console.warn);
    });
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && reply.cancel) { event.preventDefault(); perform(reply.cancel, host).catch(host.error || console.warn); }
    });
    return form;
  }

  global.BatonRender = Object.freeze({
    screen, input, component: renderComponent, perform,
    /** The DOM helper the renderer builds with: el(tag, {attributes, onevent}, ...children). */
    el,
    /** The component types this renderer draws. */
    componentTypes: () => Object.keys(components).sort(),
    /** The action types this renderer performs. */
    actionTypes: () => Object.keys(actions).sort(),
    platform: "web",
  });
})(typeof window !== "undefined" ? window : globalThis);
