// Browse the datasets the caller may use: tables, columns, types, bounds, keys and privacy units.
// Only what the catalog declares public is shown; the gateway never sends data.

import { enc, get } from "./api.js";
import { append, clear, fmt, h, pageHead, table, td } from "./ui.js";

function keysView(keys) {
  if (!keys) return h("span", { class: "muted", text: "—" });
  const shown = keys.slice(0, 18);
  return h(
    "div",
    { class: "keys" },
    shown.map((key) => h("span", { class: "chip static", text: fmt(key) })),
    keys.length > shown.length ? h("span", { class: "small muted", text: `+${keys.length - shown.length} more` }) : null,
  );
}

function tableView(info) {
  const rows = info.columns.map((column) => [
    td(h("span", { class: "mono", text: column.name })),
    column.type,
    column.bounds
      ? td(`[${fmt(column.bounds.low)}, ${fmt(column.bounds.high)}]`, "nowrap")
      : column.bounds_epsilon != null
        ? h("span", { class: "small", title: "chosen with a DP mechanism by the first query that needs them, charged once per data version", text: `private (ε ${fmt(column.bounds_epsilon)})` })
        : h("span", { class: "muted", text: "—" }),
    keysView(column.keys),
    column.nullable ? "yes" : "no",
    h(
      "span",
      { class: "small" },
      column.description || "",
      column.join_rows_per_key != null
        ? h("span", { class: "chip static", title: "two private tables may be joined on this column: each side keeps at most this many rows per value before the join", text: `join key: ≤ ${fmt(column.join_rows_per_key)} rows per value` })
        : null,
      column.per_unit
        ? h("span", { class: "chip static", title: "the custodian says this column holds one value per privacy unit (an attribute of the person on each of their rows)", text: "one value per unit" })
        : null,
    ),
  ]);
  return h(
    "section",
    { class: "card" },
    h(
      "div",
      { class: "card-head" },
      h("h2", { class: "mono", text: info.name }),
      info.public ? h("span", { class: "badge ok", text: "public table" }) : h("span", { class: "badge accent", text: `privacy unit: ${info.privacy_unit.kind === "row" ? "one row" : info.privacy_unit.column}` }),
    ),
    info.description ? h("p", { class: "muted", text: info.description }) : null,
    h("p", { class: "small muted", text: `Neighbouring datasets differ by ${info.privacy_unit.description}.` }),
    table(["Column", "Type", "Bounds", "Public keys", "Nullable", "Description"], rows, { label: `Columns of ${info.name}` }),
  );
}

// How to ask from psql, a BI tool or pandas, when the gateway's PostgreSQL listener runs. The
// password is the caller's own token, which the console never shows again.
function clientsCard(me, detail) {
  const dataset = detail.name;
  const first = detail.tables.find((t) => !t.public) || detail.tables[0];
  const pg = me.postgres;
  if (!pg) return null;
  const ssl = pg.tls ? " sslmode=require" : "";
  const line = `psql "host=${pg.host} port=${pg.port} user=${me.name} dbname=${dataset}${ssl}"`;
  return h(
    "section",
    { class: "card" },
    h("div", { class: "card-head" }, h("h2", { text: "Ask from psql, a BI tool or pandas" })),
    h("p", { class: "small muted", text: "This gateway also speaks PostgreSQL's protocol: user = your name, password = your API token, database = the dataset. Every answer carries its interval as <column>_low and <column>_high, and a NOTICE with the loss spent." }),
    h("pre", { class: "mono wrap", text: `${line}\nSET dalenius.epsilon = 0.1;\nSELECT COUNT(*) FROM ${first ? first.name : "<table>"};` }),
    h("p", { class: "small muted", text: "DBeaver, Metabase and Tableau: the PostgreSQL driver with the same host, port and database (docs/clients.md)." }),
  );
}

export async function datasetsPage(root, params) {
  const [{ datasets }, me] = await Promise.all([get("/datasets"), get("/me")]);
  clear(root);
  root.append(pageHead("Datasets", "What each catalog declares public: tables, columns, clipping bounds and key lists. The data themselves never leave the server."));
  if (!datasets.length) {
    root.append(h("div", { class: "card empty", text: "No dataset is available to you yet. Ask a curator for a grant." }));
    return;
  }
  const chosen = datasets.find((d) => d.name === params.get("name")) || datasets[0];
  const cards = h(
    "div",
    { class: "grid cards" },
    datasets.map((d) =>
      h(
        "a",
        { class: "card", href: `#/datasets?name=${enc(d.name)}`, "aria-current": d.name === chosen.name ? "true" : null, style: `text-decoration:none;color:inherit;${d.name === chosen.name ? "border-color:#2f4fc9;box-shadow:0 0 0 2px #c9d3fb" : ""}` },
        h("div", { class: "card-head" }, h("h2", { text: d.name }), d.available ? null : h("span", { class: "badge bad", text: "unavailable" })),
        h("p", { class: "small muted", text: d.description || "No description." }),
        h("p", { class: "small" }, "Tables: ", h("span", { class: "mono", text: d.tables.join(", ") || "—" })),
        d.problem ? h("p", { class: "small", style: "color:#b42323", text: d.problem }) : null,
      ),
    ),
  );
  root.append(cards);
  if (!chosen.available) return;
  const detail = await get(`/datasets/${enc(chosen.name)}`);
  append(root, [
    h("div", { class: "page-head", style: "margin-top:0.5rem" }, h("h2", { text: `${detail.name}: tables` }), h("span", { class: "spacer" }), h("a", { class: "button", href: `#/query?dataset=${enc(detail.name)}`, text: "Query this dataset" })),
    clientsCard(me, detail),
    detail.tables.map(tableView),
  ]);
}
