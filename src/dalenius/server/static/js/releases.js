// Releases published whole: a density curve with its bands, a consistent hierarchy of counts,
// synthetic origin–destination flows (OnTheMap's synthesizer), perturbed rows (record
// perturbation, its card in perturb.js) and a series over time (continual release, its card in
// series.js).
// Each spends from the caller's budget exactly as a query does; an identical request is free.

import { get, post } from "./api.js";
import { lineChart } from "./chart.js";
import { perturbCard } from "./perturb.js";
import { collectionSeries, continualSeries, seriesCard } from "./series.js";
import { clear, errorAlert, fmt, fmtLoss, h, mainValue, pageHead, table, td } from "./ui.js";

const enc = encodeURIComponent;

function field(id, label, input) {
  return h("div", { class: "field" }, h("label", { for: id, text: label }), input);
}

function input(id, value, placeholder) {
  return h("input", { type: "text", id, name: id, value: value ?? "", placeholder: placeholder ?? "", inputmode: "decimal" });
}

function words(id, value, placeholder) {
  const box = input(id, value, placeholder);
  box.setAttribute("inputmode", "text");
  return box;
}

// The series form's optional fields: left empty, they are not sent (the endpoint's defaults).
function optional(body, key, box, number) {
  const text = box.value.trim();
  if (text) body[key] = number ? Number(text) : text;
}

// A form's ε starts at what the remaining budget can pay: its usual value, or the remainder
// rounded down to 3 significant digits when less is left. The check is exact (the budget's
// fraction, not its float), so a default is never refused for being a hair over. When nothing
// is left the usual value stays, and the refusal says so.
function decimal(text) {
  // "0.25" -> [25n, 100n]: a short decimal as an exact fraction
  const [whole, part = ""] = text.split(".");
  return [BigInt(whole + part), 10n ** BigInt(part.length)];
}

function fraction(exact) {
  const [p, q = "1"] = String(exact).split("/");
  return [BigInt(p), BigInt(q)];
}

export function payable(usual, remaining) {
  const value = mainValue(remaining);
  if (value === null || !(value > 0)) return String(usual);
  const exact = remaining.epsilon_exact ?? remaining.rho_exact;
  const [p, q] = exact ? fraction(exact) : decimal(value.toFixed(12));
  const fits = (text) => {
    const [a, b] = decimal(text);
    return a * q <= p * b;
  };
  if (fits(String(usual))) return String(usual);
  const places = Math.max(0, 2 - Math.floor(Math.log10(value)));
  for (let k = Math.floor(value * 10 ** places) + 1; k > 0; k -= 1) {
    const text = (k / 10 ** places).toFixed(places).replace(/\.?0+$/, "");
    if (fits(text)) return text;
  }
  return String(usual);
}

async function remainingOn(dataset) {
  try {
    return (await get(`/datasets/${enc(dataset)}/budget`)).remaining;
  } catch {
    return null; // no budget to read (a curator without a grant): keep the usual defaults
  }
}

function densityCard(dataset, result) {
  const chart = lineChart({
    x: result.grid[0],
    y: result.density,
    low: result.low,
    high: result.high,
    bandLow: result.band_low,
    bandHigh: result.band_high,
    xLabel: result.columns[0],
    title: `Density of ${result.columns[0]}`,
    confidence: result.confidence,
  });
  const meta = `${fmtLoss(result.loss)}${result.cached ? " (from the ledger's record, no new cost)" : ""}; noisy count ${result.count.toLocaleString()}`;
  return h(
    "section",
    { class: "card", "data-release": "density" },
    h("div", { class: "card-head" }, h("h2", { text: `Density of ${result.columns[0]} (${dataset})` }), h("span", { class: "meta", text: meta })),
    chart,
    h("p", { class: "small muted", text: "Dark band: pointwise interval; light band: the whole curve at once. Both cover the data's kernel estimate at the stated confidence." }),
  );
}

function hierarchyCard(dataset, result) {
  const rows = result.nodes
    .filter((n) => n.level <= 1)
    .map((n) => [n.level === 0 ? "(total)" : n.path.join(" / "), td(String(n.final), "num"), td(`[${fmt(n.final_low, 6)}, ${fmt(n.final_high, 6)}]`, "num nowrap"), td(fmt(n.noisy, 6), "num")]);
  const meta = `${result.nodes.length} nodes; ${fmtLoss(result.loss)}${result.cached ? " (no new cost)" : ""}`;
  return h(
    "section",
    { class: "card", "data-release": "hierarchy" },
    h("div", { class: "card-head" }, h("h2", { text: `${result.levels.join(" › ")} (${dataset})` }), h("span", { class: "meta", text: meta })),
    table(["Node", { label: "Count", num: true }, { label: `${Math.round(result.confidence * 100)}% interval`, num: true }, { label: "Noisy", num: true }], rows, { label: "Hierarchy" }),
    h("p", { class: "small muted", text: "Counts are non-negative integers that add up exactly; the full table (every level) is in the API's answer." }),
  );
}

function flowsCard(dataset, result) {
  const top = [...result.flows].sort((a, b) => b[2] - a[2]).slice(0, 15);
  const rows = top.map(([origin, destination, count]) => [String(origin), String(destination), td(String(count), "num")]);
  const csv = [`${result.origin},${result.destination},count`, ...result.flows.map((f) => f.map((v) => `"${String(v).replaceAll('"', '""')}"`).join(","))].join("\n");
  const link = h("a", { class: "button secondary", download: `flows-${dataset}.csv`, href: URL.createObjectURL(new Blob([csv], { type: "text/csv" })), text: "Download all flows (CSV)" });
  const [num, den] = result.prior.split("/");
  const prior = Number(num) / Number(den ?? 1);
  const meta = `${result.rows.toLocaleString()} synthetic rows; prior ${fmt(prior, 4)} per origin; ${fmtLoss(result.loss)}${result.cached ? " (no new cost)" : ""}`;
  return h(
    "section",
    { class: "card", "data-release": "onthemap" },
    h("div", { class: "card-head" }, h("h2", { text: `${result.origin} → ${result.destination} (${dataset})` }), h("span", { class: "meta", text: meta })),
    table([result.origin, result.destination, { label: "Synthetic count", num: true }], rows, { label: "Largest synthetic flows" }),
    h("div", { class: "actions" }, link),
    h("p", { class: "small muted", text: `The ${result.flows.length} flows are drawn from the posterior of the real origins under a Dirichlet prior: pure ε, the same rows again at no cost.` }),
  );
}

// A series over time, from a table of the dataset or from a local-DP collection. A table's
// series is declared (all public) as POST /datasets/{name}/continual takes it: its first
// publication charges the lifetime ε, the same declaration later publishes the periods closed
// since, free. A collection's is read with GET /ldp/collections/{name}/series: free, its
// devices' loss capped by the collection.
function continualForm(dataset, release, epsilonInput) {
  const source = h("select", { id: "series-source", name: "series-source" }, h("option", { value: "table", text: "a table of the dataset" }), h("option", { value: "collection", text: "a local-DP collection" }));
  const collection = h("select", { id: "series-collection", name: "series-collection" });
  const table = words("series-table", "visits");
  const time = words("series-time", "visit_date");
  const period = h("select", { id: "series-period", name: "series-period" }, ["day", "week", "month"].map((p) => h("option", { value: p, text: p, selected: p === "month" })));
  const start = words("series-start", "2023-01-01", "YYYY-MM-DD");
  const horizon = input("series-horizon", "12");
  const value = words("series-value", "", "none (counts only)");
  const maxRows = input("series-max-rows", "", "the unit's max_rows");
  const levels = input("series-levels", "", "all");
  const asOf = words("series-as-of", "", "today (UTC)");
  const confidence = input("series-confidence", "0.95");
  const eps = epsilonInput("series-epsilon", 0.5);
  const feedback = h("div", { "aria-live": "polite" });
  const fromTable = [field("series-table", "Table", table), field("series-time", "Date column", time), field("series-value", "Summed int column (optional)", value), field("series-max-rows", "Rows per unit over the horizon (optional)", maxRows), field("series-levels", "Tree levels (optional; 1: each period once)", levels), field("series-epsilon", "Lifetime ε (pure)", eps)];
  const fromCollection = [field("series-collection", "Collection", collection)];
  const showSource = async () => {
    const ldp = source.value === "collection";
    for (const box of fromTable) box.hidden = ldp;
    for (const box of fromCollection) box.hidden = !ldp;
    if (ldp && !collection.options.length) {
      const { collections } = await get("/ldp/collections");
      collection.replaceChildren(...collections.map((c) => h("option", { value: c.name, text: `${c.name} (${c.protocol})` })));
    }
  };
  source.addEventListener("change", () => showSource().catch((failure) => feedback.replaceChildren(errorAlert(failure))));
  const send = () => {
    if (source.value === "collection") {
      const query = new URLSearchParams({ period: period.value, start: start.value.trim(), horizon: horizon.value.trim(), confidence: confidence.value.trim() || "0.95" });
      if (asOf.value.trim()) query.set("as_of", asOf.value.trim());
      return get(`/ldp/collections/${enc(collection.value)}/series?${query}`);
    }
    const body = { table: table.value.trim(), time: time.value.trim(), period: period.value, start: start.value.trim(), horizon: Number(horizon.value), epsilon: eps.value.trim() };
    optional(body, "value", value);
    optional(body, "max_rows", maxRows, true);
    optional(body, "levels", levels, true);
    optional(body, "as_of", asOf);
    optional(body, "confidence", confidence, true);
    return post(`/datasets/${enc(dataset.value)}/continual`, body);
  };
  const card = (name, result) => seriesCard(result.collection ? collectionSeries(result) : continualSeries(name, result));
  const form = h(
    "form",
    { class: "card", id: "series-form", onsubmit: release(feedback, send, card) },
    h("h2", { text: "Series over time" }),
    h("p", { class: "small muted", text: "Counts (and clipped sums) of a table per day, week or month under one lifetime ε, charged at the series' first publication (publishing the same series again as periods close costs nothing); or a local-DP collection's estimates per period of arrival, free." }),
    h(
      "div",
      { class: "grid two" },
      field("series-source", "Source", source),
      ...fromCollection,
      fromTable.slice(0, 2),
      field("series-period", "Period", period),
      field("series-start", "First day", start),
      field("series-horizon", "Horizon (periods, at most 1024)", horizon),
      fromTable.slice(2, 5),
      field("series-as-of", "Periods closed by (optional)", asOf),
      field("series-confidence", "Confidence of the intervals", confidence),
      fromTable[5],
    ),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Publish series" })),
    feedback,
  );
  for (const box of fromCollection) box.hidden = true;
  return form;
}

export async function releasesPage(root) {
  const { datasets } = await get("/datasets");
  clear(root);
  root.append(pageHead("Releases", "Publish a whole product at once: a density curve with its bands, a hierarchy of counts that add up, synthetic origin–destination flows, every row of a table perturbed, or a series over time with its bands."));
  if (!datasets.length) {
    root.append(h("div", { class: "card empty", text: "No dataset is granted to you yet." }));
    return;
  }
  const dataset = h("select", { id: "rel-dataset", name: "dataset" }, datasets.map((d) => h("option", { value: d.name, text: d.name })));
  // Every release of this visit stays, newest first: a release is paid for, so a later one must
  // not push an earlier one off the page. A refusal shows under the form that asked.
  const outputs = h("div", { id: "release-outputs", "aria-live": "polite" });
  const outputsHead = h("h2", { text: "Released in this session (newest first)", hidden: true });
  const show = (card) => {
    outputsHead.hidden = false;
    outputs.prepend(card);
  };
  const defaults = []; // [input, usual ε]: refreshed from the remaining budget, unless edited
  const refreshDefaults = async () => {
    const remaining = await remainingOn(dataset.value);
    for (const [box, usual] of defaults) {
      if (box.dataset.edited !== "yes") box.value = payable(usual, remaining);
    }
  };
  const epsilonInput = (id, usual) => {
    const box = input(id, String(usual));
    box.addEventListener("input", () => (box.dataset.edited = "yes"));
    defaults.push([box, usual]);
    return box;
  };
  const release = (feedback, send, card) => async (event) => {
    event.preventDefault();
    clear(feedback);
    const button = event.currentTarget.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const result = await send();
      show(card(dataset.value, result));
      await refreshDefaults();
    } catch (failure) {
      feedback.append(errorAlert(failure));
    } finally {
      button.disabled = false;
    }
  };

  const dTable = input("dens-table", "people");
  const dColumn = input("dens-column", "age");
  const dBandwidth = input("dens-bandwidth", "2");
  const dEps = epsilonInput("dens-epsilon", 0.1);
  const dDelta = input("dens-delta", "1e-6");
  const dFeedback = h("div", { "aria-live": "polite" });
  const densityForm = h(
    "form",
    {
      class: "card",
      id: "density-form",
      onsubmit: release(
        dFeedback,
        () => {
          const body = { table: dTable.value.trim(), columns: [dColumn.value.trim()], bandwidth: Number(dBandwidth.value), epsilon: dEps.value.trim(), delta: dDelta.value.trim() };
          return post(`/datasets/${enc(dataset.value)}/density`, body);
        },
        densityCard,
      ),
    },
    h("h2", { text: "Density curve" }),
    h("div", { class: "grid two" }, field("dens-table", "Table", dTable), field("dens-column", "Numeric column", dColumn), field("dens-bandwidth", "Bandwidth", dBandwidth), field("dens-epsilon", "ε", dEps), field("dens-delta", "δ", dDelta)),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Release curve" })),
    dFeedback,
  );

  const hTable = input("hier-table", "people");
  const hLevels = input("hier-levels", "state, education");
  const hEps = epsilonInput("hier-epsilon", 0.1);
  const hFeedback = h("div", { "aria-live": "polite" });
  const hierarchyForm = h(
    "form",
    {
      class: "card",
      id: "hierarchy-form",
      onsubmit: release(
        hFeedback,
        () => {
          const body = { table: hTable.value.trim(), levels: hLevels.value.split(",").map((v) => v.trim()).filter(Boolean), epsilon: hEps.value.trim() };
          return post(`/datasets/${enc(dataset.value)}/hierarchy`, body);
        },
        hierarchyCard,
      ),
    },
    h("h2", { text: "Hierarchy of counts" }),
    h("div", { class: "grid two" }, field("hier-table", "Table", hTable), field("hier-levels", "Levels (key columns, coarsest first)", hLevels), field("hier-epsilon", "ε", hEps)),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Release tables" })),
    hFeedback,
  );
  const oTable = input("otm-table", "people");
  const oOrigin = input("otm-origin", "state");
  const oDestination = input("otm-destination", "education");
  const oEps = epsilonInput("otm-epsilon", 0.5);
  const oRows = input("otm-per-destination", "500");
  const oFeedback = h("div", { "aria-live": "polite" });
  const onthemapForm = h(
    "form",
    {
      class: "card",
      id: "onthemap-form",
      onsubmit: release(
        oFeedback,
        () => {
          const body = {
            table: oTable.value.trim(),
            origin: oOrigin.value.trim(),
            destination: oDestination.value.trim(),
            epsilon: oEps.value.trim(),
            per_destination: Number(oRows.value),
          };
          return post(`/datasets/${enc(dataset.value)}/onthemap`, body);
        },
        flowsCard,
      ),
    },
    h("h2", { text: "Synthetic origin–destination flows" }),
    h(
      "div",
      { class: "grid two" },
      field("otm-table", "Table", oTable),
      field("otm-origin", "Origin (key column)", oOrigin),
      field("otm-destination", "Destination (key column)", oDestination),
      field("otm-epsilon", "ε (pure; the prior follows from it)", oEps),
      field("otm-per-destination", "Rows per destination, at most", oRows),
    ),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Release flows" })),
    oFeedback,
  );
  const pTable = input("pert-table", "people");
  const pColumns = input("pert-columns", "age, sex, income");
  pColumns.setAttribute("inputmode", "text");
  const pEps = epsilonInput("pert-epsilon", 1);
  const pDelta = input("pert-delta", "", "0 (pure ε)");
  const pTight = h("input", { type: "checkbox", id: "pert-tight", name: "pert-tight" });
  const pFeedback = h("div", { "aria-live": "polite" });
  const perturbForm = h(
    "form",
    {
      class: "card",
      id: "perturb-form",
      onsubmit: release(
        pFeedback,
        () => {
          const body = { table: pTable.value.trim(), columns: pColumns.value.split(",").map((v) => v.trim()).filter(Boolean), epsilon: pEps.value.trim(), tight: pTight.checked };
          if (pDelta.value.trim()) body.delta = pDelta.value.trim();
          return post(`/datasets/${enc(dataset.value)}/perturb`, body);
        },
        perturbCard,
      ),
    },
    h("h2", { text: "Perturbed rows" }),
    h("p", { class: "small muted", text: "Every row of a table whose privacy unit holds one row, each value noised: numeric columns with public bounds by Laplace noise, columns with public keys by the discrete mechanism. Any later analysis of the rows is free." }),
    h(
      "div",
      { class: "grid two" },
      field("pert-table", "Table", pTable),
      field("pert-columns", "Columns (with bounds or keys)", pColumns),
      field("pert-epsilon", "ε (5% of it for the number of rows)", pEps),
      field("pert-delta", "δ", pDelta),
    ),
    h("label", { class: "check-field", for: "pert-tight" }, pTight, " Tight calibration b = diam/(ε − 2·ln(1−δ)) instead of the course's diam/(ε − ln(1−δ))"),
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Release rows" })),
    pFeedback,
  );
  const seriesForm = continualForm(dataset, release, epsilonInput);
  dataset.addEventListener("change", () => refreshDefaults());
  root.append(h("section", { class: "card" }, field("rel-dataset", "Dataset", dataset)), densityForm, hierarchyForm, onthemapForm, perturbForm, seriesForm, outputsHead, outputs);
  await refreshDefaults();
}
