// The caller's budgets (a gauge each) and their own ledger: every charge, newest first.

import { get } from "./api.js";
import { gauge, ring, spendChart } from "./chart.js";
import { clear, fmtLoss, fmtTime, h, mainValue, pageHead, statusBadge, table, td } from "./ui.js";

const CHARGED = new Set(["pending", "committed", "lost"]);

export function budgetCards(budgets) {
  return h(
    "div",
    { class: "grid cards" },
    budgets.map((b) => {
      const cap = mainValue(b.budget);
      const measure = b.definition === "zcdp" ? "ρ" : "ε";
      const remaining = mainValue(b.remaining) ?? 0;
      return h(
        "section",
        { class: "card", "aria-label": `Budget on ${b.dataset}` },
        h("div", { class: "card-head" }, h("h2", { text: b.dataset }), h("span", { class: "meta", text: b.definition })),
        cap === null
          ? h("p", { class: "muted", text: "No budget set: nothing can be spent here." })
          : h("div", { class: "gauge-card" }, ring({ spent: cap - remaining, budget: cap, size: 96 }), h("div", { style: "flex:1" }, gauge({ spent: cap - remaining, budget: cap, measure }), h("p", { class: "small muted", style: "margin-top:0.5rem", text: b.refresh_days ? `Renewed every ${b.refresh_days} days.` : "Never renewed." }))),
      );
    }),
  );
}

export async function budgetPage(root) {
  const [{ budgets }, { entries }] = await Promise.all([get("/me/budgets"), get("/me/ledger?limit=500")]);
  clear(root);
  root.append(pageHead("Budget & history", "What you may still spend on each dataset, and every charge made to your budget."));
  root.append(budgets.length ? budgetCards(budgets) : h("div", { class: "card empty", text: "No dataset is available to you yet." }));

  const charged = entries.filter((e) => CHARGED.has(e.status)).slice().reverse();
  if (charged.length) {
    const byDataset = new Map();
    for (const entry of charged) {
      const list = byDataset.get(entry.dataset) || [];
      const before = list.length ? list[list.length - 1].total : 0;
      list.push({ time: new Date(entry.created_at).getTime(), total: before + (mainValue(entry.charged) ?? 0) });
      byDataset.set(entry.dataset, list);
    }
    for (const [dataset, points] of byDataset) {
      const budget = budgets.find((b) => b.dataset === dataset);
      root.append(
        h(
          "section",
          { class: "card" },
          h("div", { class: "card-head" }, h("h2", { text: `Spending on ${dataset}` }), h("span", { class: "meta", text: "cumulative, one step per charge" })),
          spendChart(points, budget ? mainValue(budget.budget) : null),
        ),
      );
    }
  }
  const rows = entries.map((e) => [
    td(fmtTime(e.created_at), "nowrap"),
    e.dataset,
    td(e.sql, "sql"),
    td(fmtLoss(e.charged), "nowrap"),
    statusBadge(e.status),
  ]);
  root.append(
    h(
      "section",
      { class: "card" },
      h("div", { class: "card-head" }, h("h2", { text: "Your ledger" }), h("span", { class: "meta", text: "repeated queries are answered from here at no cost and add no line" })),
      table(["When", "Dataset", "SQL", "Charged", "Status"], rows, { label: "Your ledger", empty: "No query has been charged yet." }),
    ),
  );
}
