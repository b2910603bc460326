// Local differential privacy collections: estimates with error bars (every signed-in caller),
// creating a collection and each client's lifetime ε (curators). Devices submit their reports
// to the API with the collection's key; the console never sees a report.

import { get, post } from "./api.js";
import { barChart } from "./chart.js";
import { clear, copy, errorAlert, fmt, fmtTime, h, pageHead, table, td } from "./ui.js";

const enc = encodeURIComponent;
const PROTOCOLS = ["olh", "grr", "oue", "sue", "blh", "hr", "rappor", "cms", "hcms", "sfp", "dbitflip"];

// The key is shown once (the gateway keeps only its hash), so the box stays until the curator
// dismisses it: nothing redraws the page under it. Dismissing reloads the page, which then lists
// the new collection.
function keyBox(made, done) {
  return h(
    "div",
    { class: "alert ok", role: "status", id: "ldp-key" },
    h("h3", { text: `Collection ${made.name} created` }),
    h("p", { class: "small", text: "The submission key is shown once: the gateway keeps only a hash. Copy it now; devices send it in X-Collection-Key." }),
    h("div", { class: "secret" }, h("code", { class: "token-text", text: made.submission_key }), h("button", { type: "button", class: "button small secondary", onclick: () => copy(made.submission_key), text: "Copy" })),
    h("div", { class: "actions" }, h("button", { type: "button", class: "button small", id: "ldp-key-done", onclick: done, text: "I have saved the key" })),
  );
}

function createForm(again) {
  const name = h("input", { type: "text", id: "ldp-name", name: "name", required: true, placeholder: "colours" });
  const protocol = h("select", { id: "ldp-protocol", name: "protocol" }, PROTOCOLS.map((p) => h("option", { value: p, text: p })));
  const epsilon = h("input", { type: "text", id: "ldp-epsilon", name: "epsilon", required: true, value: "1", inputmode: "decimal" });
  const values = h("textarea", { id: "ldp-values", name: "values", rows: 2, required: true, placeholder: "red, green, blue" });
  const feedback = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        // An earlier error goes; an earlier collection's key stays until it is dismissed.
        for (const shown of feedback.querySelectorAll("[role=alert]")) shown.remove();
        const list = values.value.split(",").map((v) => v.trim()).filter(Boolean);
        const field = ["rappor", "cms", "hcms"].includes(protocol.value) ? "candidates" : "domain";
        const body = { name: name.value.trim(), protocol: protocol.value, epsilon: epsilon.value.trim() };
        // sequence-fragment puzzles discover words: the field holds their alphabet, not a list
        if (protocol.value === "sfp") body.alphabet = values.value.trim();
        else body[field] = list;
        if (protocol.value === "rappor") body.epsilon = epsilon.value.trim();
        try {
          const made = await post("/ldp/collections", body);
          feedback.append(keyBox(made, () => again()));
        } catch (failure) {
          feedback.append(errorAlert(failure));
        }
      },
    },
    h("h2", { text: "New collection" }),
    h("div", { class: "grid two" },
      h("div", { class: "field" }, h("label", { for: "ldp-name", text: "Name" }), name),
      h("div", { class: "field" }, h("label", { for: "ldp-protocol", text: "Protocol" }), protocol),
      h("div", { class: "field" }, h("label", { for: "ldp-epsilon", text: "ε of one report" }), epsilon),
      h("div", { class: "field" }, h("label", { for: "ldp-values", text: "Values (domain or candidates), comma-separated; for sfp, the alphabet of the words" }), values),
    ),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Create" })),
    feedback,
  );
  return form;
}

function estimatesCard(est) {
  const head = h("div", { class: "card-head" }, h("h2", { text: `Estimates: ${est.collection}` }), h("span", { class: "meta", text: `${est.protocol}, ${est.reports.toLocaleString()} reports, ε ${fmt(est.epsilon_per_report, 4)} per report` }));
  if (est.kind === "mean") {
    const text = est.mean === null ? "No reports yet: nothing to estimate." : `Mean ${fmt(est.mean, 5)}  [${fmt(est.lower, 5)}, ${fmt(est.upper, 5)}]`;
    return h("section", { class: "card", "data-collection": est.collection }, head, h("p", { class: "big", text }));
  }
  if (!est.reports || !est.rows) {
    // No estimate yet: zeros with intervals of width zero would read as a confident zero.
    return h("section", { class: "card", "data-collection": est.collection }, head, h("p", { class: "empty", "data-empty": "no-reports", text: "No reports yet: nothing to estimate." }));
  }
  const rows = est.rows;
  const chart = barChart({
    labels: rows.map((r) => r.value),
    values: rows.map((r) => r.estimate),
    lows: rows.map((r) => r.lower),
    highs: rows.map((r) => r.upper),
    title: "Estimated count",
    confidence: est.confidence,
  });
  const cells = rows.map((r) => [r.value, td(fmt(r.estimate, 6), "num"), td(`[${fmt(r.lower, 6)}, ${fmt(r.upper, 6)}]`, "num nowrap"), td(fmt(r.stderr, 4), "num"), r.detected === undefined ? "" : r.detected ? "detected" : ""]);
  return h(
    "section",
    { class: "card", "data-collection": est.collection },
    head,
    chart,
    table(["Value", { label: "Estimate", num: true }, { label: `${Math.round(est.confidence * 100)}% interval`, num: true }, { label: "Std. error", num: true }, ""], cells, { label: "Estimates" }),
  );
}

async function clientsCard(name) {
  const { clients } = await get(`/ldp/collections/${enc(name)}/clients?limit=50`);
  const rows = clients.map((c) => [td(c.client, "mono"), td(fmt(c.epsilon, 6), "num"), td(String(c.reports), "num"), td(fmtTime(c.updated_at), "small")]);
  return h("section", { class: "card" }, h("h2", { text: "Clients' lifetime ε" }), table(["Client", { label: "Lifetime ε", num: true }, { label: "Reports", num: true }, "Last report"], rows, { label: "Clients", empty: "No reports yet." }));
}

export async function ldpPage(root, params, state) {
  const { collections } = await get("/ldp/collections");
  const curator = state.me && state.me.role === "curator";
  clear(root);
  root.append(pageHead("Local DP", "Collections of reports randomised on each device; estimates with their error bars."));
  const again = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  if (curator) root.append(createForm(again));
  if (!collections.length) {
    root.append(h("div", { class: "card empty", text: "No collection yet." }));
    return;
  }
  const chosen = params.get("name") || collections[0].name;
  const list = collections.map((c) => [
    td(h("a", { href: `#/ldp?name=${enc(c.name)}`, "aria-current": c.name === chosen ? "true" : null, text: c.name })),
    c.protocol,
    td(fmt(c.epsilon, 4), "num"),
    td(String(c.reports), "num"),
    td(String(c.clients), "num"),
  ]);
  root.append(h("section", { class: "card" }, h("h2", { text: "Collections" }), table(["Name", "Protocol", { label: "ε", num: true }, { label: "Reports", num: true }, { label: "Clients", num: true }], list, { label: "Collections" })));
  const feedback = h("div", { "aria-live": "polite" });
  root.append(feedback);
  try {
    root.append(estimatesCard(await get(`/ldp/collections/${enc(chosen)}/estimates`)));
    if (curator) root.append(await clientsCard(chosen));
  } catch (failure) {
    feedback.append(errorAlert(failure));
  }
}
