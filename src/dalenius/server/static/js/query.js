// The analyst's main page: pick a dataset, write SQL, explain it for free, run it for ε.

import { enc, get, post } from "./api.js";
import { barChart, gauge, ring } from "./chart.js";
import { clear, errorAlert, fmt, fmtEps, fmtLoss, h, loading, mainValue, pageHead, table, td, toast } from "./ui.js";

const LAST_DATASET = "dalenius.dataset";
const DRAFT = "dalenius.sql";

// Example queries built from the dataset's own public metadata: a count, a filtered count, a
// grouped count with an average, and one the gateway refuses (to see a refusal explained).
export function examples(detail) {
  const table = (detail.tables || []).find((t) => !t.public) || (detail.tables || [])[0];
  if (!table) return [];
  const cols = table.columns;
  const keyed = cols.filter((c) => c.keys && c.keys.length > 1 && c.keys.length <= 20 && c.type === "str");
  keyed.sort((a, b) => b.keys.length - a.keys.length);
  const bounded = cols.filter((c) => c.bounds && (c.type === "int" || c.type === "float") && !/(^|_)id$/.test(c.name));
  const unkeyed = cols.find((c) => !c.keys && !c.bounds);
  const out = [{ label: "Count rows", sql: `SELECT COUNT(*) FROM ${table.name}`, epsilon: "0.1" }];
  if (bounded.length) {
    const c = bounded[0];
    const mid = Math.round((Number(c.bounds.low) + Number(c.bounds.high)) / 2);
    out.push({ label: `Count with a filter`, sql: `SELECT COUNT(*)\nFROM ${table.name}\nWHERE ${c.name} >= ${mid}`, epsilon: "0.1" });
  }
  if (keyed.length) {
    const k = keyed[0];
    const avg = bounded.length ? `,\n       AVG(${bounded[bounded.length - 1].name})` : "";
    out.push({ label: `Group by ${k.name}`, sql: `SELECT ${k.name},\n       COUNT(*)${avg}\nFROM ${table.name}\nGROUP BY ${k.name}`, epsilon: "0.3" });
  }
  if (keyed.length > 1 && bounded.length > 1) {
    const k = keyed[keyed.length - 1];
    out.push({ label: `Sum by ${k.name}`, sql: `SELECT ${k.name}, SUM(${bounded[1].name})\nFROM ${table.name}\nGROUP BY ${k.name}`, epsilon: "0.2" });
  }
  const join = unitJoin(detail);
  if (join) out.push(join);
  if (unkeyed) out.push({ label: "A refused query", sql: `SELECT ${unkeyed.name}\nFROM ${table.name}`, epsilon: "0.1" });
  return out;
}

// A private ⋈ private join, where two private tables declare the same privacy unit column: the
// one join on private data the gateway answers (each person's rows stay bounded on both sides).
export function unitJoin(detail) {
  const ids = (detail.tables || []).filter((t) => !t.public && t.privacy_unit && t.privacy_unit.kind === "id");
  for (const a of ids) {
    for (const b of ids) {
      if (a === b || a.privacy_unit.column !== b.privacy_unit.column) continue;
      // The side with fewer rows per unit (one row per person) gives the grouping column.
      if (a.privacy_unit.max_rows > b.privacy_unit.max_rows) continue;
      const keyed = a.columns.filter((c) => c.type === "str" && c.keys && c.keys.length > 1 && c.keys.length <= 20);
      const key = keyed.sort((x, y) => y.keys.length - x.keys.length)[0];
      if (!key) continue;
      const unit = a.privacy_unit.column;
      return {
        label: `Join ${a.name} ⋈ ${b.name}`,
        sql: `SELECT a.${key.name},\n       COUNT(*) AS ${b.name}\nFROM ${a.name} a\nJOIN ${b.name} b ON a.${unit} = b.${unit}\nGROUP BY a.${key.name}`,
        epsilon: "0.2",
      };
    }
  }
  return null;
}

function editor(initial) {
  const gutter = h("div", { class: "gutter", "aria-hidden": "true" });
  const area = h("textarea", { id: "sql", name: "sql", rows: 7, spellcheck: "false", "aria-label": "SQL query", autocapitalize: "off" });
  area.value = initial;
  let bad = null;
  const paint = () => {
    const count = area.value.split("\n").length;
    clear(gutter);
    for (let i = 1; i <= count; i++) {
      gutter.append(h("span", { class: i === bad ? "bad-line" : null, text: String(i) }), "\n");
    }
    gutter.scrollTop = area.scrollTop;
  };
  area.addEventListener("input", () => {
    bad = null;
    paint();
    sessionStorage.setItem(DRAFT, area.value);
  });
  area.addEventListener("scroll", () => (gutter.scrollTop = area.scrollTop));
  paint();
  return {
    node: h("div", { class: "editor" }, gutter, area),
    area,
    markLine(line, column) {
      bad = line;
      paint();
      if (!line) return;
      const lines = area.value.split("\n");
      let offset = 0;
      for (let i = 0; i < line - 1 && i < lines.length; i++) offset += lines[i].length + 1;
      offset += Math.max((column || 1) - 1, 0);
      area.focus();
      area.setSelectionRange(offset, offset);
    },
  };
}

// How ε was chosen from the analyst's error target: per aggregate, the share and the error bar it
// gives, beside the error 1% less ε would give (which misses the target).
function accuracyView(accuracy, pct) {
  if (!accuracy) return null;
  const rows = accuracy.targets.map((t) => [
    td(t.output, "mono"),
    t.asked,
    td(fmtEps(t.epsilon), "num"),
    td(`± ${fmt(t.error)}`, "num"),
    td(`± ${fmt(t.error_at_99_percent_of_epsilon)}`, "num"),
  ]);
  return h(
    "div",
    { id: "accuracy-panel" },
    h("h3", { text: `ε chosen for accuracy: ${fmtEps(accuracy.epsilon)}`, style: "margin-top:1rem" }),
    table(["Column", "Target", { label: "ε", num: true }, { label: `${pct} error`, num: true }, { label: "with ε − 1%", num: true }], rows, { label: "Error targets" }),
    (accuracy.notes || []).map((text) => h("p", { class: "note", text })),
  );
}

function explainView(data) {
  const pct = `${Math.round(data.confidence * 1000) / 10}%`;
  const rows = data.measurements.map((m) => [
    td(m.name, "mono"),
    m.aggregate,
    td(fmt(m.sensitivity), "num"),
    td(fmtEps(m.epsilon), "num"),
    td(fmt(m.noise_scale), "num"),
    td(`± ${fmt(m.error)}`, "num"),
    td(m.lower_bound === null || m.lower_bound === undefined ? "—" : `± ${fmt(m.lower_bound)}`, "num"),
    h("span", { class: "small muted", text: m.mechanism }),
  ]);
  const context = [];
  context.push(h("dt", { text: "Table" }), h("dd", { text: data.table }));
  context.push(h("dt", { text: "Privacy unit" }), h("dd", { text: data.privacy_unit }));
  for (const f of data.filters || []) context.push(h("dt", { text: "Filter" }), h("dd", { class: "mono", text: f }));
  for (const g of data.groups || []) {
    const how = g.keys === null || g.keys === undefined ? " — no public keys: groups are selected privately (costs δ)" : ` — ${g.keys} public keys, every one answered (empty ones too)`;
    context.push(h("dt", { text: "Group by" }), h("dd", {}, h("span", { class: "mono", text: g.column }), how));
  }
  return h(
    "section",
    { class: "card", id: "explain-panel", "aria-label": "Explanation" },
    h("div", { class: "card-head" }, h("h2", { text: "Explain" }), h("span", { class: "badge ok", text: "free — no data read" })),
    h(
      "div",
      { class: "stat-row" },
      h("div", { class: "stat" }, h("div", { class: "label", text: "Total cost" }), h("div", { class: "value", id: "explain-cost", text: fmtLoss(data.loss) })),
      h("div", { class: "stat" }, h("div", { class: "label", text: "Measurements" }), h("div", { class: "value", text: String(data.measurements.length) })),
      h("div", { class: "stat" }, h("div", { class: "label", text: "Error bars" }), h("div", { class: "value", text: pct })),
    ),
    h("dl", { class: "facts" }, context),
    h("h3", { text: "Noisy measurements", style: "margin-top:1rem" }),
    table(
      ["", "Aggregate", { label: "Sensitivity", num: true }, { label: "ε", num: true }, { label: "Noise scale", num: true }, { label: `${pct} error`, num: true }, { label: "Floor γ", num: true }, "Mechanism"],
      rows,
      { label: "Noisy measurements" },
    ),
    data.lower_bound_basis ? h("p", { class: "small muted", id: "explain-floor", text: data.lower_bound_basis }) : null,
    h("h3", { text: "Outputs (post-processing, free)", style: "margin-top:1rem" }),
    h("ul", { class: "small" }, (data.outputs || []).map((o) => h("li", {}, h("span", { class: "mono", text: o.name }), " = ", h("span", { class: "mono", text: o.computed_as })))),
    (data.notes || []).map((text) => h("p", { class: "note", text })),
    accuracyView(data.accuracy, pct),
    h("p", { class: "note", text: "Expected errors cover the noise only, not the bias that clipping values to the public bounds may add. The ε is split equally over the measurements." }),
    h("details", { class: "more" }, h("summary", { text: "Exact SQL the engine will run" }), h("pre", { text: data.exact_sql })),
  );
}

function cellView(cell, kind) {
  if (kind === "key" || cell.low === null || cell.low === undefined) return td(fmt(cell.value));
  // "value ± half-width" only when the interval is centred on the value; an interval clamped to
  // the column's bounds is shown as it is.
  const numeric = typeof cell.high === "number" && typeof cell.low === "number" && typeof cell.value === "number";
  const half = numeric ? (cell.high - cell.low) / 2 : null;
  const centred = numeric && Math.abs(cell.value - cell.low - (cell.high - cell.value)) <= 1e-6 * Math.max(1, Math.abs(half));
  return td(
    [
      h("span", { class: "value", text: fmt(cell.value) }),
      centred ? h("span", { class: "pm", text: ` ± ${fmt(half, 3)}` }) : null,
      h("span", { class: "interval", text: `[${fmt(cell.low)}, ${fmt(cell.high)}]` }),
    ],
    "num",
  );
}

function resultView(data) {
  const pct = `${Math.round(data.confidence * 1000) / 10}%`;
  const headers = data.columns.map((name, i) => ({ label: name, num: data.kinds[i] !== "key" }));
  const rows = data.rows.map((row) => row.map((cell, i) => cellView(cell, data.kinds[i])));
  const keyIndex = data.kinds.indexOf("key");
  const measures = data.kinds.map((kind, i) => (kind === "key" ? null : i)).filter((i) => i !== null);
  const chartBox = h("div", { id: "chart-box" });
  let chartTabs = null;
  const drawChart = (column) => {
    clear(chartBox).append(
      barChart({
        labels: data.rows.map((row) => fmt(row[keyIndex].value)),
        values: data.rows.map((row) => row[column].value),
        lows: data.rows.map((row) => row[column].low),
        highs: data.rows.map((row) => row[column].high),
        title: data.columns[column],
        confidence: data.confidence,
      }),
    );
  };
  if (keyIndex >= 0 && data.rows.length > 0 && measures.length) {
    if (measures.length > 1) {
      chartTabs = h("div", { class: "tabs", role: "tablist", "aria-label": "Column to chart" });
      for (const column of measures) {
        const button = h("button", {
          type: "button",
          role: "tab",
          "aria-selected": column === measures[0] ? "true" : "false",
          text: data.columns[column],
          onclick: () => {
            for (const other of chartTabs.children) other.setAttribute("aria-selected", "false");
            button.setAttribute("aria-selected", "true");
            drawChart(column);
          },
        });
        chartTabs.append(button);
      }
    }
    drawChart(measures[0]);
  }
  // A shared answer (another analyst's release of the same query) is charged to this analyst.
  const free = data.cached && !data.shared;
  const spentText = free ? "nothing" : fmtLoss(data.spent);
  return h(
    "section",
    { class: "card", id: "result-panel", "aria-label": "Result" },
    h(
      "div",
      { class: "card-head" },
      h("h2", { text: "Result" }),
      data.shared ? h("span", { class: "badge accent", text: "the dataset's shared answer" }) : free ? h("span", { class: "badge accent", text: "answered from the ledger — free" }) : h("span", { class: "badge warn", text: "released" }),
      h("span", { class: "spacer" }),
      data.entry_id ? h("span", { class: "meta mono", text: `entry ${data.entry_id.slice(0, 12)}` }) : null,
    ),
    h(
      "div",
      { class: "stat-row" },
      h("div", { class: "stat" }, h("div", { class: "label", text: "Spent" }), h("div", { class: "value", id: "result-spent", text: spentText })),
      h("div", { class: "stat" }, h("div", { class: "label", text: "Remaining" }), h("div", { class: "value", id: "result-remaining", text: fmtLoss(data.remaining) })),
      h("div", { class: "stat" }, h("div", { class: "label", text: "Intervals" }), h("div", { class: "value", text: pct })),
    ),
    keyIndex >= 0 && measures.length ? [chartTabs, chartBox] : null,
    h("h3", { text: "Table", style: "margin-top:1rem" }),
    table(headers, rows, { label: "Query result" }),
    (data.notes || []).map((text) => h("p", { class: "note", "data-role": "result-note", text })),
    h("p", { class: "note", text: `Each value is shown ± half its ${pct} interval; the interval covers the noise, not clipping bias. Repeating the same query returns the same answer at no cost.` }),
  );
}

function budgetCard(budget) {
  const box = h("section", { class: "card", id: "budget-card", "aria-label": "Your budget" });
  const head = h("div", { class: "card-head" }, h("h2", { text: "Your budget" }), h("span", { class: "meta", text: budget.dataset }));
  box.append(head);
  const cap = mainValue(budget.budget);
  if (cap === null) {
    box.append(h("p", { class: "muted", text: "No budget is set for you on this dataset: you can explain queries, but not run them. Ask a curator." }));
    return box;
  }
  const spent = mainValue(budget.spent) ?? 0;
  const measure = budget.definition === "zcdp" ? "ρ" : "ε";
  const remainingValue = mainValue(budget.remaining) ?? 0;
  box.append(
    h(
      "div",
      { class: "gauge-card" },
      ring({ spent: cap - remainingValue, budget: cap }),
      h(
        "div",
        { style: "flex:1" },
        gauge({ spent: cap - remainingValue, budget: cap, measure }),
        h("p", { class: "small muted", id: "budget-remaining", "data-remaining": remainingValue, style: "margin:0.6rem 0 0", text: `Remaining ${fmtLoss(budget.remaining)} of ${fmtLoss(budget.budget)}; ${budget.refresh_days ? `renewed every ${budget.refresh_days} days` : "never renewed"}.` }),
      ),
    ),
  );
  if (spent === 0) box.append(h("p", { class: "note", text: "Nothing spent yet. Explain is always free." }));
  return box;
}

function columnsCard(detail, insert) {
  const box = h("section", { class: "card", "aria-label": "Columns" });
  box.append(h("div", { class: "card-head" }, h("h2", { text: "Columns" }), h("span", { class: "meta", text: "click to insert" })));
  for (const tableInfo of detail.tables) {
    box.append(h("h3", { class: "mono", text: `${tableInfo.name}`, style: "margin-top:0.5rem" }), h("p", { class: "small muted", text: `privacy unit: ${tableInfo.privacy_unit.description}` }));
    const list = h("div", { class: "examples" });
    for (const column of tableInfo.columns) {
      const tag = column.keys
        ? `${column.keys.length} keys`
        : column.bounds
          ? `[${fmt(column.bounds.low)}, ${fmt(column.bounds.high)}]`
          : column.bounds_epsilon != null
            ? `bounds private (ε ${fmt(column.bounds_epsilon)})`
            : column.type;
      list.append(h("button", { type: "button", class: "chip", title: column.description || column.type, onclick: () => insert(column.name) }, h("span", { class: "mono", text: column.name }), h("span", { class: "muted", text: ` ${tag}` })));
    }
    box.append(list);
  }
  return box;
}

export async function queryPage(root, params) {
  const { datasets } = await get("/datasets");
  clear(root);
  root.append(pageHead("Ask a query", "Explain shows what a query costs and how precise it will be, without reading any data. Run spends the ε you choose from your budget."));
  const usable = datasets.filter((d) => d.available);
  if (!usable.length) {
    root.append(h("div", { class: "card empty", text: "No dataset is available to you yet. Ask a curator for a grant." }));
    return;
  }
  const wanted = params.get("dataset") || sessionStorage.getItem(LAST_DATASET);
  const chosen = usable.find((d) => d.name === wanted) || usable[0];
  const select = h("select", { id: "dataset", name: "dataset" }, usable.map((d) => h("option", { value: d.name, selected: d.name === chosen.name, text: d.name })));
  const [detail, budget] = await Promise.all([get(`/datasets/${enc(chosen.name)}`), get(`/datasets/${enc(chosen.name)}/budget`)]);
  sessionStorage.setItem(LAST_DATASET, chosen.name);
  const samples = examples(detail);
  const initial = sessionStorage.getItem(DRAFT) || (samples[2] || samples[0] || { sql: "" }).sql;
  const ed = editor(initial);
  const epsilon = h("input", { type: "text", id: "epsilon", name: "epsilon", inputmode: "decimal", value: (samples[2] || samples[0] || { epsilon: "0.1" }).epsilon, "aria-describedby": "epsilon-hint" });
  const delta = h("input", { type: "text", id: "delta", name: "delta", inputmode: "decimal", placeholder: "none", "aria-describedby": "epsilon-hint" });
  // Accuracy first: an error to meet on every COUNT and SUM instead of ε (the gateway computes
  // the smallest ε that meets it at the chosen confidence, and spends exactly that).
  const target = h("input", { type: "text", id: "target", name: "target", inputmode: "decimal", placeholder: "or ± error", "aria-describedby": "epsilon-hint" });
  const confidence = h("select", { id: "confidence", name: "confidence" }, [0.9, 0.95, 0.99].map((c) => h("option", { value: c, selected: c === 0.95, text: `${c * 100}%` })));
  const output = h("div", { id: "output", "aria-live": "polite" });
  const budgetBox = h("div", {}, budgetCard(budget));
  const explainButton = h("button", { type: "button", class: "button secondary", id: "explain-button" }, "Explain", h("span", { class: "cost", text: "free" }));
  const runButton = h("button", { type: "button", class: "button", id: "run-button" }, "Run query", h("span", { class: "cost", id: "run-cost" }));
  const syncCost = () => {
    const wanted = target.value.trim();
    epsilon.disabled = Boolean(wanted);
    runButton.querySelector(".cost").textContent = wanted ? `spends the ε for ± ${wanted}` : `spends ε ${epsilon.value || "?"}`;
  };
  epsilon.addEventListener("input", syncCost);
  target.addEventListener("input", syncCost);
  syncCost();

  const body = () => {
    const out = { sql: ed.area.value, confidence: Number(confidence.value) };
    if (target.value.trim()) out.target_error = target.value.trim();
    else if (epsilon.value.trim()) out.epsilon = epsilon.value.trim();
    if (delta.value.trim()) out.delta = delta.value.trim();
    return out;
  };
  const busy = async (button, work) => {
    explainButton.disabled = runButton.disabled = true;
    clear(output).append(loading(button === runButton ? "Running…" : "Explaining…"));
    try {
      await work();
    } catch (failure) {
      clear(output).append(errorAlert(failure, ed.area.value));
      if (failure.error && failure.error.line) ed.markLine(failure.error.line, failure.error.column);
    } finally {
      explainButton.disabled = runButton.disabled = false;
    }
  };
  const refreshBudget = async () => {
    const fresh = await get(`/datasets/${enc(chosen.name)}/budget`);
    clear(budgetBox).append(budgetCard(fresh));
  };
  explainButton.addEventListener("click", () =>
    busy(explainButton, async () => {
      const data = await post(`/datasets/${enc(chosen.name)}/explain`, body());
      clear(output).append(explainView(data));
    }),
  );
  runButton.addEventListener("click", () =>
    busy(runButton, async () => {
      try {
        const data = await post(`/datasets/${enc(chosen.name)}/query`, body());
        clear(output).append(resultView(data));
        toast(data.cached && !data.shared ? "Answered from the ledger at no cost" : `Spent ${fmtLoss(data.spent)}`);
      } finally {
        await refreshBudget();
      }
    }),
  );
  select.addEventListener("change", () => {
    sessionStorage.removeItem(DRAFT);
    location.hash = `#/query?dataset=${enc(select.value)}`;
  });
  const insert = (text) => {
    const { selectionStart: a, selectionEnd: b, value } = ed.area;
    ed.area.value = value.slice(0, a) + text + value.slice(b);
    ed.area.dispatchEvent(new Event("input"));
    ed.area.focus();
    ed.area.setSelectionRange(a + text.length, a + text.length);
  };

  root.append(
    h(
      "div",
      { class: "grid two" },
      h(
        "div",
        {},
        h(
          "section",
          { class: "card", "aria-label": "Query editor" },
          h("div", { class: "row", style: "margin-bottom:0.9rem" }, h("div", { class: "field" }, h("label", { for: "dataset", text: "Dataset" }), select), h("div", { class: "field narrow" }, h("label", { for: "epsilon", text: "ε to spend" }), epsilon), h("div", { class: "field narrow" }, h("label", { for: "target", text: "or target ±" }), target), h("div", { class: "field tiny" }, h("label", { for: "delta", text: "δ" }), delta), h("div", { class: "field narrow" }, h("label", { for: "confidence", text: "Error bars" }), confidence)),
          h("label", { for: "sql", text: "SQL" }),
          ed.node,
          h("p", { class: "small muted", id: "epsilon-hint", style: "margin:0.5rem 0 0", text: "Smaller ε means more noise and less budget spent. Or give a target ±: the error every COUNT and SUM must meet at the chosen confidence; the smallest ε that meets it is spent. δ is needed only to GROUP BY a column without public keys. COUNT, SUM and AVG; WHERE on any column." }),
          h("div", { class: "examples", "aria-label": "Example queries" }, h("span", { class: "small muted", text: "Examples:" }), samples.map((sample) => h("button", { type: "button", class: "chip", onclick: () => { ed.area.value = sample.sql; epsilon.value = sample.epsilon; target.value = ""; syncCost(); ed.area.dispatchEvent(new Event("input")); }, text: sample.label }))),
          h("div", { class: "actions" }, explainButton, runButton),
        ),
      ),
      h("div", {}, budgetBox),
    ),
    output,
    columnsCard(detail, insert),
  );
}
