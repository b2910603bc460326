// A series over time (continual release): each period's estimate drawn as a line with its
// interval shaded, the running totals as a second view, a table of every point with its interval
// and the whole series as CSV. The card takes a series already put in one shape —
// { periods, measures: [{ key, label, per, running, runningLabel }] } where per and running hold
// value/low/high/se arrays — so any product publishing per period can use it; continualSeries
// puts a dataset's continual release in that shape, collectionSeries a local-DP collection's
// series. The form lives on the Releases page.

import { seriesChart } from "./chart.js";
import { fmt, fmtLoss, h, table, td } from "./ui.js";

const ADVERB = { day: "Daily", week: "Weekly", month: "Monthly" };

function column(rows, key) {
  return rows.map((row) => (row[key] === null || row[key] === undefined ? NaN : Number(row[key])));
}

function part(rows, prefix) {
  return { value: column(rows, prefix), low: column(rows, `${prefix}_low`), high: column(rows, `${prefix}_high`), se: column(rows, `${prefix}_se`) };
}

// A dataset's continual release (POST /datasets/{name}/continual) in the card's shape.
export function continualSeries(dataset, result) {
  const rows = result.periods;
  const measures = [{ key: "count", label: "Count", per: part(rows, "count"), running: part(rows, "running_count"), runningLabel: "Running total" }];
  if (result.value) {
    measures.push({ key: "sum", label: `Sum of ${result.value}`, per: part(rows, "sum"), running: part(rows, "running_sum"), runningLabel: "Running total" });
  }
  const charged = `${fmtLoss(result.loss)}${result.cached ? " (from the ledger's record, no new cost)" : ""}`;
  return {
    kind: "continual",
    title: `${ADVERB[result.period] ?? ""} series of ${result.table} (${dataset})`,
    meta: `${result.closed} of ${result.horizon} periods closed; lifetime ε = ${fmt(result.lifetime_epsilon, 6)}; this publication: ${charged}`,
    note: `Counts keep at most ${result.max_rows} row(s) of each unit over the whole horizon (sums: values clipped to the column's bounds). ${result.nodes_measured} of ${result.nodes} tree nodes measured (${result.levels} levels); earlier periods improve as later ones close. Intervals are conservative (a Chernoff bound on the exact noise), per point.`,
    period: result.period,
    periods: rows.map((row) => row.period),
    measures,
    confidence: result.confidence,
    file: `series-${dataset}-${result.table}-${result.period}.csv`,
  };
}

// A local-DP collection's series (GET /ldp/collections/{name}/series) in the card's shape: one
// measure per value of a frequency collection, the mean of a mean collection. A period without
// reports has no estimate (NaN: a gap in the line, an empty cell in the CSV).
export function collectionSeries(result) {
  const views = (pick) => ({ per: pick((p) => p.estimate), running: pick((p) => p.running) });
  let measures;
  if (result.kind === "mean") {
    const pick = (view) => {
      const at = (key) => result.periods.map((p) => (view(p)[key] ?? NaN));
      return { value: at("mean"), low: at("lower"), high: at("upper"), se: at("stderr") };
    };
    measures = [{ key: "mean", label: "Mean", ...views(pick), runningLabel: "Running mean" }];
  } else {
    measures = result.values.map((label, j) => {
      const pick = (view) => {
        const at = (key) => result.periods.map((p) => (view(p).rows ? view(p).rows[j][key] : NaN));
        return { value: at("estimate"), low: at("lower"), high: at("upper"), se: at("stderr") };
      };
      return { key: String(label), label: `Count of ${label}`, ...views(pick), runningLabel: "Running total" };
    });
  }
  const lifetime = result.lifetime_epsilon === null ? "no lifetime cap" : `lifetime ε ≤ ${fmt(result.lifetime_epsilon, 6)} per device`;
  const reports = result.periods.reduce((sum, p) => sum + p.reports, 0);
  return {
    kind: "ldp-series",
    title: `${ADVERB[result.period] ?? ""} series of collection ${result.collection}`,
    meta: `${result.closed} of ${result.horizon} periods closed; ${reports.toLocaleString("en-US")} reports; ${result.protocol}, ε ${fmt(result.epsilon_per_report, 4)} per report; ${lifetime}; free`,
    note: "Local DP: the reports were randomised on the devices, so every number here is post-processing of them, and each device's loss over the collection's whole life is capped by the collection (not by this series). A period's estimate counts a device's repeats of one memoised response once; a running total is the collection's estimate from every report received by the period's end. Periods are days (UTC) of arrival.",
    period: result.period,
    periods: result.periods.map((p) => p.period),
    measures,
    confidence: result.confidence,
    file: `series-${result.collection}-${result.period}.csv`,
  };
}

function csvCell(value) {
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "";
  return `"${String(value).replaceAll('"', '""')}"`;
}

// Every period, every measure, both views: what the chart and the table show, and the SEs.
export function seriesCsv(series) {
  const header = ["period"];
  for (const m of series.measures) {
    for (const view of [m.key, `running_${m.key}`]) header.push(view, `${view}_low`, `${view}_high`, `${view}_se`);
  }
  const lines = series.periods.map((period, i) => {
    const cells = [period];
    for (const m of series.measures) {
      for (const v of [m.per, m.running]) cells.push(v.value[i], v.low[i], v.high[i], v.se[i]);
    }
    return cells.map(csvCell).join(",");
  });
  return [header.map(csvCell).join(","), ...lines].join("\n");
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

// A month reads "Jan 2023" under the chart (its first day says nothing more); days and weeks
// keep their first day. The table and the CSV keep the full date.
function axisLabel(day, period) {
  const match = /^(\d{4})-(\d{2})-\d{2}$/.exec(day);
  return period === "month" && match ? `${MONTHS[Number(match[2]) - 1]} ${match[1]}` : day;
}

function tabs(choices, chosen, onChoose) {
  const bar = h("div", { class: "tabs", role: "tablist", "aria-label": "View" });
  for (const [key, label] of choices) {
    bar.append(
      h("button", {
        type: "button",
        role: "tab",
        "data-view": key,
        "aria-selected": key === chosen ? "true" : "false",
        text: label,
        onclick: () => {
          for (const b of bar.children) b.setAttribute("aria-selected", b.dataset.view === key ? "true" : "false");
          onChoose(key);
        },
      }),
    );
  }
  return bar;
}

export function seriesCard(series) {
  const pct = `${Math.round(series.confidence * 1000) / 10}%`;
  const state = { view: "per", measure: 0 };
  const figure = h("div", { class: "series-figure" });
  const rows = h("div", { class: "series-table" });
  const draw = () => {
    const m = series.measures[state.measure];
    const v = state.view === "per" ? m.per : m.running;
    const per = state.view === "per";
    const what = per ? `${m.label} per ${series.period ?? "period"}` : `${m.runningLabel}: ${m.label.toLowerCase()}`;
    figure.replaceChildren(
      seriesChart({ labels: series.periods.map((p) => axisLabel(p, series.period)), values: v.value, lows: v.low, highs: v.high, xLabel: series.period === "month" ? "month" : `${series.period ?? "period"} starting`, yLabel: m.label, title: what, confidence: series.confidence }),
    );
    // A period without an estimate (no reports) says so, rather than showing a number.
    const num = (x, digits) => (Number.isFinite(x) ? fmt(x, digits) : "—");
    const span = (i) => (Number.isFinite(v.value[i]) ? `[${fmt(v.low[i], 5)}, ${fmt(v.high[i], 5)}]` : "no reports");
    const cells = series.periods.map((period, i) => [td(period, "nowrap"), td(num(v.value[i], 5), "num"), td(span(i), "num nowrap"), td(num(v.se[i], 4), "num")]);
    const head = per ? "Estimate" : m.runningLabel;
    rows.replaceChildren(
      h("p", { class: "small series-caption", text: `${what}, each with its ${pct} interval` }),
      table(["Period", { label: head, num: true }, { label: `${pct} interval`, num: true }, { label: "Std. error", num: true }], cells, { label: "Series points", empty: "No period has closed yet." }),
    );
  };
  const controls = h("div", { class: "series-controls" }, tabs([["per", "Per period"], ["running", series.measures[0].runningLabel]], "per", (view) => {
    state.view = view;
    draw();
  }));
  if (series.measures.length > 1) {
    const id = `series-measure-${Math.random().toString(36).slice(2, 8)}`;
    const pick = h("select", { id, class: "series-measure", onchange: () => ((state.measure = Number(pick.value)), draw()) }, series.measures.map((m, i) => h("option", { value: String(i), text: m.label })));
    controls.append(h("div", { class: "field" }, h("label", { for: id, text: "Measure" }), pick));
  }
  draw();
  const link = h("a", {
    class: "button secondary series-download",
    download: series.file.replace(/[^\w.-]+/g, "_"),
    href: URL.createObjectURL(new Blob([seriesCsv(series)], { type: "text/csv" })),
    text: `Download CSV (${series.periods.length} periods)`,
  });
  return h(
    "section",
    { class: "card", "data-release": series.kind },
    h("div", { class: "card-head" }, h("h2", { text: series.title }), h("span", { class: "meta", text: series.meta })),
    controls,
    figure,
    rows,
    h("div", { class: "actions" }, link),
    h("p", { class: "small muted", text: series.note }),
  );
}
