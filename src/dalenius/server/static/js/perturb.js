// Perturbed rows (record perturbation, course document 004): every row of a table published with
// each value noised. What a reader needs beside the rows is the error table — per column the
// noise's scale, its mean error, the error bar and the floor γ no (ε, δ)-DP mechanism beats — and
// the rows themselves as a file: the card shows the first rows and links to all of them as CSV.
// The form lives on the Releases page (releases.js), which every release product shares.

import { fmt, fmtLoss, h, table, td } from "./ui.js";

const PREVIEW = 10;

function csvCell(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "number" ? String(value) : `"${String(value).replaceAll('"', '""')}"`;
}

export function rowsCsv(columns, rows) {
  return [columns.map(csvCell).join(","), ...rows.map((row) => row.map(csvCell).join(","))].join("\n");
}

// A numeric column's bar and floor are distances (±); a categorical column's scale is p, the
// chance of each wrong key, and its mean error and floor are rates of wrong values.
function errorRow(line) {
  const plusMinus = (value) => (value === null || value === undefined ? "—" : `±${fmt(value, 4)}`);
  return [
    h("span", { class: "mono", text: line.column }),
    td(line.domain, "nowrap"),
    line.categorical ? "discrete" : "Laplace",
    td(fmt(line.epsilon, 4), "num"),
    td(fmt(line.delta, 3), "num"),
    td(fmt(line.scale, 4), "num"),
    td(fmt(line.mean_abs_error, 4), "num"),
    td(line.categorical ? "—" : plusMinus(line.error), "num nowrap"),
    td(line.categorical ? fmt(line.lower_bound, 4) : plusMinus(line.lower_bound), "num nowrap"),
  ];
}

export function perturbCard(dataset, result) {
  const pct = `${Math.round(result.confidence * 100)}%`;
  const headers = [
    "Column",
    "Domain",
    "Noise",
    { label: "ε", num: true },
    { label: "δ", num: true },
    { label: "Scale", num: true },
    { label: "Mean |error|", num: true },
    { label: `${pct} error`, num: true },
    { label: "Floor γ", num: true },
  ];
  const shown = result.rows.slice(0, PREVIEW);
  const numeric = result.columns.map((_, j) => shown.some((row) => typeof row[j] === "number"));
  const preview = shown.map((row) => row.map((value, j) => td(fmt(value, 6), numeric[j] ? "num" : null)));
  const name = `perturbed-${dataset}-${result.columns.join("-")}.csv`.replace(/[^\w.-]+/g, "_");
  const link = h("a", {
    class: "button secondary",
    id: "pert-download",
    download: name,
    href: URL.createObjectURL(new Blob([rowsCsv(result.columns, result.rows)], { type: "text/csv" })),
    text: `Download all ${result.rows_released.toLocaleString("en-US")} rows (CSV)`,
  });
  const meta = `${result.rows_released.toLocaleString("en-US")} rows; ${fmtLoss(result.loss)}${result.cached ? " (from the ledger's record, no new cost)" : ""}`;
  return h(
    "section",
    { class: "card", "data-release": "perturbation" },
    h("div", { class: "card-head" }, h("h2", { text: `Perturbed ${result.columns.join(", ")} (${dataset})` }), h("span", { class: "meta", text: meta })),
    h("p", {
      class: "small",
      text: `The number of rows is noisy too: within ±${result.rows_error.toLocaleString("en-US")} of the table's at ${pct}. Missing rows were dropped at random; extra ones are dummies at each domain's midpoint, perturbed like the others.`,
    }),
    table(headers, result.errors.map(errorRow), { label: "Error per column" }),
    h("p", {
      class: "small muted",
      text: "Laplace noise for a column with public bounds, the discrete mechanism for one with public keys. Scale: the Laplace scale b (discrete: p, the chance of each wrong key). Mean |error| and the error bar cover the noise, not the clamping of values outside the domain (discrete: the rate of wrong values). Floor γ: no (ε, δ)-DP mechanism on that domain does better (course document 004, Theorems 4 and 5).",
    }),
    h("h3", { text: `First ${preview.length} released rows` }),
    table(result.columns.map((label, j) => ({ label, num: numeric[j] })), preview, { label: "Released rows" }),
    h("div", { class: "actions" }, link),
  );
}
