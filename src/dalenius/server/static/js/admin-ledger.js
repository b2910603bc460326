// Curator page: the whole ledger (every charge), its audit trail, and the gateway's request log.

import { enc, get } from "./api.js";
import { clear, fmt, fmtLoss, fmtTime, h, pageHead, statusBadge, table, td } from "./ui.js";

const VIEWS = {
  charges: "Charges",
  audit: "Audit trail",
  requests: "Requests",
};

async function charges(filters) {
  const { entries } = await get(`/ledger?limit=500${filters}`);
  return table(
    ["When", "Analyst", "Dataset", "SQL", "Charged", "Status", "Entry"],
    entries.map((e) => [td(fmtTime(e.created_at), "nowrap"), e.analyst, e.dataset, td(e.sql, "sql"), td(fmtLoss(e.charged), "nowrap"), statusBadge(e.status), td(e.id.slice(0, 12), "mono small")]),
    { label: "Ledger charges", empty: "No charge recorded." },
  );
}

async function audit(filters) {
  const { audit: lines } = await get(`/audit?limit=500${filters}`);
  return table(
    ["#", "When", "Analyst", "Dataset", "Outcome", "Loss", "SQL", "Detail"],
    lines.map((a) => [td(String(a.seq), "num"), td(fmtTime(a.at), "nowrap"), a.analyst || h("span", { class: "muted", text: "curator" }), a.dataset, statusBadge(a.outcome), td(a.loss ? fmtLoss(a.loss) : "—", "nowrap"), td(a.sql, "sql"), td(a.detail, "small")]),
    { label: "Audit trail", empty: "The audit trail is empty." },
  );
}

async function requests(filters, params) {
  const who = params.get("analyst") ? `&principal=${enc(params.get("analyst"))}` : "";
  const { requests: lines } = await get(`/requests?limit=500${who}`);
  return table(
    ["When", "Principal", "Method", "Path", "Status", "Code", { label: "ms", num: true }, "Client"],
    lines.map((r) => [td(fmtTime(r.at), "nowrap"), r.principal || h("span", { class: "muted", text: "anonymous" }), r.method, td(r.path, "sql"), h("span", { class: `badge ${r.status < 400 ? "ok" : r.status < 500 ? "warn" : "bad"}`, text: String(r.status) }), r.code, td(fmt(r.millis, 3), "num"), td(r.client, "small")]),
    { label: "Request log", empty: "No request logged." },
  );
}

export async function ledgerPage(root, params) {
  const view = VIEWS[params.get("view")] ? params.get("view") : "charges";
  const analyst = h("input", { type: "text", id: "filter-analyst", value: params.get("analyst") || "", placeholder: "any" });
  const dataset = h("input", { type: "text", id: "filter-dataset", value: params.get("dataset") || "", placeholder: "any" });
  let filters = "";
  if (params.get("analyst")) filters += `&analyst=${enc(params.get("analyst"))}`;
  if (params.get("dataset")) filters += `&dataset=${enc(params.get("dataset"))}`;
  const body = view === "audit" ? await audit(filters) : view === "requests" ? await requests(filters, params) : await charges(filters);
  clear(root);
  root.append(pageHead("Ledger & audit", "Every charge, every refusal and every request, as recorded. The ledger never forgets: removed datasets and revoked analysts keep their records."));
  const go = (next) => {
    const q = new URLSearchParams({ view: next });
    if (analyst.value.trim()) q.set("analyst", analyst.value.trim());
    if (dataset.value.trim()) q.set("dataset", dataset.value.trim());
    location.hash = `#/admin/ledger?${q}`;
  };
  const tabs = h(
    "div",
    { class: "tabs", role: "tablist" },
    Object.entries(VIEWS).map(([key, label]) => h("button", { type: "button", role: "tab", "aria-selected": key === view ? "true" : "false", text: label, onclick: () => go(key) })),
  );
  const filterForm = h(
    "form",
    { class: "row", style: "margin-bottom:1rem", onsubmit: (event) => { event.preventDefault(); go(view); } },
    h("div", { class: "field" }, h("label", { for: "filter-analyst", text: "Analyst" }), analyst),
    h("div", { class: "field" }, h("label", { for: "filter-dataset", text: "Dataset" }), dataset),
    h("button", { type: "submit", class: "button secondary", text: "Filter" }),
  );
  root.append(h("section", { class: "card" }, tabs, filterForm, body));
}
