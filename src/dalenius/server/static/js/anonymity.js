// Curator page: publish a table's records anonymised (k-anonymity, ℓ-diversity, t-closeness).
// The form builds the same config `dalenius anonymize` reads from TOML, sends it as JSON to
// POST /datasets/{name}/anonymize, and shows the chosen lattice node, the loss metrics, the risks
// before and after, and a CSV download of the release. No privacy budget is spent: a syntactic
// release has no differential-privacy guarantee, which the page says in so many words.

import { enc, get, post, postStream } from "./api.js";
import { clear, errorAlert, fmt, h, pageHead, table, td } from "./ui.js";

const ROLES = [
  ["quasi", "quasi-identifier"],
  ["sensitive", "sensitive"],
  ["identifier", "identifier (dropped)"],
  ["insensitive", "kept as is"],
];

const KINDS = [
  ["identity", "as is or withheld"],
  ["intervals", "intervals (widths)"],
  ["dates", "dates (levels)"],
  ["mask", "mask (characters)"],
  ["upload", "uploaded (CSV or JSON)"],
];

const PARAMETER = { intervals: ["widths", "5, 10, 20"], dates: ["levels", "month, year"], mask: ["masked", "1, 2"] };

// A first guess at each column's role, for the form's defaults only: names that usually identify
// a person are identifiers; the rest is left for the curator to decide.
function guessRole(column) {
  const name = column.name.toLowerCase();
  if (/(^|_)(id|name|email|phone|ssn)$|date_of_birth|^zip/.test(name)) return "identifier";
  if (["age", "sex", "gender", "race"].includes(name)) return "quasi";
  if (["education", "diagnosis", "disease", "occupation"].includes(name)) return "sensitive";
  return "insensitive";
}

function guessKind(column) {
  if (/int|float|double|decimal/.test(column.type)) return "intervals";
  if (/date|time/.test(column.type)) return "dates";
  return "identity";
}

// An uploaded hierarchy: either a JSON declaration ({"type": "tree", "values": {...}}) or a CSV
// with one line per value, its generalisations after it (ARX's format; , ; or tab separated).
export function parseHierarchy(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) return JSON.parse(trimmed);
  const values = {};
  for (const line of trimmed.split(/\r?\n/)) {
    if (!line.trim()) continue;
    const cells = line.split(/[;,\t]/).map((cell) => cell.trim());
    values[cells[0]] = cells.slice(1);
  }
  return { type: "tree", values };
}

function list(text) {
  return text.split(",").map((part) => part.trim()).filter(Boolean);
}

function numbers(text) {
  return list(text).map(Number);
}

function columnRow(column, uploads) {
  const id = `anon-${column.name}`;
  const role = h("select", { id: `${id}-role`, name: `${column.name}-role`, "aria-label": `Role of ${column.name}` }, ROLES.map(([value, label]) => h("option", { value, text: label })));
  role.value = guessRole(column);
  const kind = h("select", { id: `${id}-kind`, name: `${column.name}-kind`, "aria-label": `Hierarchy of ${column.name}` }, KINDS.map(([value, label]) => h("option", { value, text: label })));
  kind.value = guessKind(column);
  const param = h("input", { type: "text", id: `${id}-param`, "aria-label": `Hierarchy levels of ${column.name}`, autocomplete: "off" });
  const file = h("input", { type: "file", id: `${id}-file`, accept: ".csv,.json,.txt", "aria-label": `Hierarchy file of ${column.name}` });
  file.addEventListener("change", async () => {
    uploads[column.name] = file.files.length ? await file.files[0].text() : null;
  });
  const none = h("span", { class: "muted", text: "—" });
  const sync = () => {
    const quasi = role.value === "quasi";
    kind.hidden = !quasi;
    none.hidden = quasi;
    const spec = PARAMETER[kind.value];
    param.hidden = !quasi || !spec;
    file.hidden = !quasi || kind.value !== "upload";
    if (spec && param.dataset.kind !== kind.value) {
      param.value = spec[1];
      param.dataset.kind = kind.value;
    }
  };
  role.addEventListener("change", sync);
  kind.addEventListener("change", sync);
  sync();
  const read = () => ({ name: column.name, role: role.value, kind: kind.value, param: param.value, upload: uploads[column.name] });
  const row = h(
    "div",
    { class: "anon-col", "data-column": column.name },
    h("div", {}, h("span", { class: "mono", text: column.name }), " ", h("span", { class: "small muted", text: column.type })),
    role,
    h("div", { class: "hier" }, none, kind, param, file),
  );
  return { row, read };
}

function hierarchyOf(entry) {
  if (entry.kind === "identity") return null;
  if (entry.kind === "upload") {
    if (!entry.upload) throw new Error(`choose a hierarchy file for ${entry.name}, or another kind.`);
    try {
      return parseHierarchy(entry.upload);
    } catch (failure) {
      throw new Error(`the hierarchy file for ${entry.name} is neither CSV nor JSON: ${failure.message}`);
    }
  }
  if (entry.kind === "intervals") return { type: "intervals", widths: numbers(entry.param) };
  if (entry.kind === "dates") return { type: "dates", levels: list(entry.param) };
  return { type: "mask", masked: numbers(entry.param) };
}

// The request body: `dalenius anonymize`'s config as JSON, without its [data] section.
function buildConfig(tableName, entries, model) {
  const pick = (role) => entries.filter((e) => e.role === role).map((e) => e.name);
  const hierarchies = {};
  for (const entry of entries.filter((e) => e.role === "quasi")) {
    const spec = hierarchyOf(entry);
    if (spec) hierarchies[entry.name] = spec;
  }
  const privacy = { k: Number(model.k), suppression_limit: Number(model.suppression) };
  if (model.l.trim()) privacy.l = Number(model.l);
  if (model.t.trim()) privacy.t = Number(model.t);
  return {
    table: tableName,
    attributes: { quasi_identifiers: pick("quasi"), sensitive: pick("sensitive"), identifiers: pick("identifier") },
    privacy,
    anonymize: { algorithm: model.algorithm, metric: model.metric },
    hierarchies,
  };
}

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.flatMap(([term, value]) => [h("dt", { text: term }), h("dd", {}, value)]));
}

const pct = (value) => (value === null || value === undefined ? "—" : `${(value * 100).toLocaleString("en-US", { maximumFractionDigits: 2 })}%`);

function riskTable(before, after) {
  const rows = [
    ["Equivalence classes", (r) => fmt(r.classes)],
    ["Records alone in their class", (r) => pct(r.sample_uniques)],
    ["Largest prosecutor risk (1 / smallest class)", (r) => pct(r.prosecutor_max)],
    ["Average prosecutor risk", (r) => pct(r.prosecutor_avg)],
    ["Records above the risk threshold", (r) => pct(r.records_at_risk)],
    ["Marketer risk (share re-identified)", (r) => pct(r.marketer)],
    ["Estimated population uniques", (r) => pct(r.population_uniques)],
  ];
  return table(
    ["Risk", { label: "Table as it is", num: true }, { label: "Release", num: true }],
    rows.map(([label, get_]) => [label, td(before ? get_(before) : "—", "num"), td(get_(after), "num")]),
    { label: "Re-identification risks" },
  );
}

function csvOf(data) {
  const columns = Object.keys(data);
  const quote = (v) => (v === null ? "" : `"${String(v).replaceAll('"', '""')}"`);
  const n = columns.length ? data[columns[0]].length : 0;
  const lines = [columns.map(quote).join(",")];
  for (let i = 0; i < n; i += 1) lines.push(columns.map((c) => quote(data[c][i])).join(","));
  return lines.join("\n");
}

function resultCard(dataset, tableName, answer, before) {
  const report = answer.report;
  const released = report.released || {};
  const levels = Object.entries(report.levels || {});
  const node = levels.length ? levels.map(([col, level]) => `${col}=${level}`).join(", ") : "— (Mondrian partitions, no lattice node)";
  const loss = Object.entries(report.loss).map(([name, value]) => [
    h("span", {}, h("span", { class: "mono", text: name }), name === report.metric ? [" ", h("span", { class: "badge accent", text: "minimised" })] : null),
    td(fmt(value, 6), "num"),
  ]);
  const sensitive = (released.sensitive || []).map((s) => [h("span", { class: "mono", text: s.attribute }), td(fmt(s.distinct_l), "num"), td(fmt(s.entropy_l, 4), "num"), td(fmt(s.t, 4), "num")]);
  const columns = Object.keys(answer.data);
  const preview = Array.from({ length: Math.min(answer.rows, 10) }, (_, i) => columns.map((c) => answer.data[c][i] ?? "—"));
  const download = h("a", {
    class: "button secondary",
    id: "anon-download",
    download: `${dataset}-${tableName}-anonymised.csv`,
    href: URL.createObjectURL(new Blob([csvOf(answer.data)], { type: "text/csv" })),
    text: `Download CSV (${fmt(answer.rows)} records)`,
  });
  return h(
    "section",
    { class: "card anon-result", "data-result": "anonymize" },
    h("div", { class: "card-head" }, h("h2", { text: `${tableName} anonymised (${dataset})` }), h("span", { class: "meta", text: `${report.seconds.toFixed(2)} s` })),
    facts([
      ["Privacy models", report.models.join("; ")],
      ["Optimal node", h("span", { class: "mono", id: "anon-node", text: node })],
      ["Records in / released", `${fmt(report.rows_in)} / ${fmt(report.rows_out)}`],
      ["Suppressed", `${fmt(report.suppressed)} (${pct(report.suppressed / Math.max(report.rows_in, 1))}; limit ${pct(report.suppression_limit)})`],
      ["Lattice nodes evaluated", report.nodes_total ? `${fmt(report.nodes_evaluated)} of ${fmt(report.nodes_total)}` : "—"],
      ["Identifiers dropped", report.dropped.join(", ") || "none"],
      ["Release re-checked", `k = ${fmt(released.k)} over ${fmt(released.classes)} classes`],
    ]),
    h("h3", { text: "Information loss" }),
    table(["Metric", { label: "Value", num: true }], loss, { label: "Loss metrics" }),
    sensitive.length ? h("h3", { text: "Sensitive attributes in the release" }) : null,
    sensitive.length ? table(["Attribute", { label: "distinct ℓ", num: true }, { label: "entropy ℓ", num: true }, { label: "t (EMD)", num: true }], sensitive, { label: "Sensitive attributes" }) : null,
    h("h3", { text: "Re-identification risks" }),
    riskTable(before, answer.risk),
    report.notes.length ? h("ul", { class: "small" }, report.notes.map((note) => h("li", { text: note }))) : null,
    h("h3", { text: `First ${preview.length} released records` }),
    table(columns, preview, { label: "Released records" }),
    h("div", { class: "actions" }, download),
  );
}

export async function anonymityPage(root) {
  const { datasets } = await get("/datasets");
  clear(root);
  root.append(
    pageHead(
      "Anonymity",
      "Publish a table's records generalised until every class is k-anonymous (and ℓ-diverse, t-close). A syntactic model: no privacy budget is spent, and no differential-privacy guarantee is given.",
    ),
  );
  if (!datasets.length) {
    root.append(h("div", { class: "card empty", text: "No dataset is registered yet." }));
    return;
  }
  const dataset = h("select", { id: "anon-dataset", name: "dataset" }, datasets.map((d) => h("option", { value: d.name, text: d.name })));
  const tableSelect = h("select", { id: "anon-table", name: "table" });
  const columnsBox = h("div", {});
  const output = h("div", { "aria-live": "polite" });
  const k = h("input", { type: "number", id: "anon-k", min: "1", step: "1", value: "5" });
  const l = h("input", { type: "number", id: "anon-l", min: "1", step: "1", value: "2", placeholder: "none" });
  const t = h("input", { type: "number", id: "anon-t", min: "0", max: "1", step: "0.01", placeholder: "none" });
  const suppression = h("input", { type: "number", id: "anon-suppression", min: "0", max: "1", step: "0.01", value: "0.02" });
  const algorithm = h("select", { id: "anon-algorithm" }, h("option", { value: "lattice", text: "lattice (optimal node)" }), h("option", { value: "mondrian", text: "Mondrian (partitions)" }));
  const metric = h("select", { id: "anon-metric" }, ["ncp", "precision", "entropy", "discernibility"].map((m) => h("option", { value: m, text: m })));
  const submit = h("button", { class: "button", type: "submit", id: "anon-run", text: "Anonymise" });
  let rows = [];
  let detail = null;

  const showColumns = () => {
    const info = detail.tables.find((x) => x.name === tableSelect.value);
    const uploads = {};
    rows = info.columns.map((column) => columnRow(column, uploads));
    clear(columnsBox).append(
      h("div", { class: "anon-cols", role: "group", "aria-label": "Columns and their roles" }, h("div", { class: "anon-col anon-col-head", "aria-hidden": "true" }, h("span", { text: "Column" }), h("span", { text: "Role" }), h("span", { text: "Hierarchy (quasi-identifiers)" })), rows.map((r) => r.row)),
    );
  };
  const loadDataset = async () => {
    detail = await get(`/datasets/${enc(dataset.value)}`);
    clear(tableSelect).append(...detail.tables.map((x) => h("option", { value: x.name, text: x.name })));
    showColumns();
  };
  dataset.addEventListener("change", () => loadDataset().catch((failure) => clear(output).append(errorAlert(failure))));
  tableSelect.addEventListener("change", showColumns);

  const form = h(
    "form",
    {
      class: "card anon-form",
      id: "anonymize-form",
      onsubmit: async (event) => {
        event.preventDefault();
        clear(output);
        let body;
        try {
          body = buildConfig(tableSelect.value, rows.map((r) => r.read()), { k: k.value, l: l.value, t: t.value, suppression: suppression.value, algorithm: algorithm.value, metric: metric.value });
        } catch (failure) {
          output.append(errorAlert({ error: { code: "invalid_request", message: failure.message } }));
          return;
        }
        submit.disabled = true;
        const bar = h("progress", { id: "anon-progress", max: "1", value: "0", "aria-label": "Lattice nodes settled" });
        const said = h("span", { class: "small muted", text: "Searching the generalisation lattice…" });
        output.append(h("div", { class: "anon-busy", id: "anon-busy" }, bar, said));
        const name = dataset.value;
        try {
          const before = await post(`/datasets/${enc(name)}/anonymity/check`, { table: body.table, quasi_identifiers: body.attributes.quasi_identifiers, sensitive: body.attributes.sensitive }).catch(() => null);
          const answer = await postStream(`/datasets/${enc(name)}/anonymize/progress`, body, (line) => {
            if (!line.progress) return;
            const [settled, total] = line.progress;
            bar.max = total;
            bar.value = settled;
            said.textContent = `${fmt(settled)} of ${fmt(total)} lattice nodes settled`;
          });
          clear(output).append(resultCard(name, body.table, answer, before && before.risk));
        } catch (failure) {
          clear(output).append(errorAlert(failure));
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("div", { class: "row" }, h("div", { class: "field" }, h("label", { for: "anon-dataset", text: "Dataset" }), dataset), h("div", { class: "field" }, h("label", { for: "anon-table", text: "Table" }), tableSelect)),
    h("h2", { text: "Columns" }),
    h("p", { class: "small muted", text: "Quasi-identifiers are what an attacker may know (age, sex, place); each gets a hierarchy of coarser values. An uploaded CSV has one line per value followed by its generalisations; JSON is a hierarchy declaration as in the TOML config." }),
    columnsBox,
    h("h2", { text: "Privacy model" }),
    h(
      "div",
      { class: "grid two" },
      h("div", { class: "field" }, h("label", { for: "anon-k", text: "k (smallest class)" }), k),
      h("div", { class: "field" }, h("label", { for: "anon-l", text: "ℓ (distinct sensitive values; empty: none)" }), l),
      h("div", { class: "field" }, h("label", { for: "anon-t", text: "t (closeness, EMD; empty: none)" }), t),
      h("div", { class: "field" }, h("label", { for: "anon-suppression", text: "Suppression limit (share of records)" }), suppression),
      h("div", { class: "field" }, h("label", { for: "anon-algorithm", text: "Algorithm" }), algorithm),
      h("div", { class: "field" }, h("label", { for: "anon-metric", text: "Loss minimised" }), metric),
    ),
    h("div", { class: "actions" }, submit),
  );
  root.append(form, output);
  await loadDataset();
}
