// Curator page: every analyst's budget with what was spent and what remains, and the form that
// sets one (ε, (ε, δ) or ρ, optionally renewed every N days).

import { enc, get, put } from "./api.js";
import { gauge } from "./chart.js";
import { clear, errorAlert, fmtLoss, h, mainValue, pageHead, table, td, toast } from "./ui.js";

function budgetForm(principals, datasets, params, done) {
  const feedback = h("div", { "aria-live": "polite" });
  const analysts = principals.map((p) => p.name);
  const analyst = h("select", { id: "budget-analyst", name: "analyst" }, analysts.map((n) => h("option", { value: n, selected: n === params.get("analyst"), text: n })));
  const dataset = h("select", { id: "budget-dataset", name: "dataset" }, datasets.map((d) => h("option", { value: d.name, selected: d.name === params.get("dataset"), text: d.name })));
  const kind = h("select", { id: "budget-kind", name: "kind" }, h("option", { value: "pure", text: "ε (pure DP)" }), h("option", { value: "approx", text: "ε, δ (approximate DP)" }), h("option", { value: "zcdp", text: "ρ (zCDP)" }));
  const first = h("input", { type: "text", id: "budget-value", name: "value", inputmode: "decimal", value: "1", required: true });
  const delta = h("input", { type: "text", id: "budget-delta", name: "delta", inputmode: "decimal", value: "1e-6" });
  const refresh = h("input", { type: "number", id: "budget-refresh", name: "refresh", min: 1, placeholder: "never" });
  const deltaField = h("div", { class: "field narrow", hidden: true }, h("label", { for: "budget-delta", text: "δ" }), delta);
  const firstLabel = h("label", { for: "budget-value", text: "ε" });
  kind.addEventListener("change", () => {
    deltaField.hidden = kind.value !== "approx";
    firstLabel.textContent = kind.value === "zcdp" ? "ρ" : "ε";
  });
  return h(
    "form",
    {
      class: "card",
      id: "budget-form",
      onsubmit: async (event) => {
        event.preventDefault();
        clear(feedback);
        const body = kind.value === "zcdp" ? { rho: first.value.trim() } : { epsilon: first.value.trim() };
        if (kind.value === "approx") body.delta = delta.value.trim();
        if (refresh.value) body.refresh_days = Number(refresh.value);
        try {
          const result = await put(`/budgets/${enc(analyst.value)}/${enc(dataset.value)}`, body);
          toast(`Budget of ${result.analyst} on ${result.dataset}: ${fmtLoss(result.budget)}`);
          done();
        } catch (failure) {
          feedback.append(errorAlert(failure));
        }
      },
    },
    h("h2", { text: "Set a budget" }),
    h(
      "div",
      { class: "row" },
      h("div", { class: "field" }, h("label", { for: "budget-analyst", text: "Analyst" }), analyst),
      h("div", { class: "field" }, h("label", { for: "budget-dataset", text: "Dataset" }), dataset),
      h("div", { class: "field" }, h("label", { for: "budget-kind", text: "Kind" }), kind),
      h("div", { class: "field narrow" }, firstLabel, first),
      deltaField,
      h("div", { class: "field narrow" }, h("label", { for: "budget-refresh" }, "Renew ", h("span", { class: "hint", text: "days" })), refresh),
      h("button", { type: "submit", class: "button", text: "Set budget" }),
    ),
    h("p", { class: "note", text: "A cap given in another kind than the dataset's is converted down, safely. A cap of 0 blocks the analyst. Changing a cap keeps its renewal period." }),
    feedback,
  );
}

function accountingCard(rows) {
  return h(
    "section",
    { class: "card" },
    h("div", { class: "card-head" }, h("h2", { text: "Datasets: total caps" }), h("span", { class: "meta", text: "colluding analysts add their losses; a total cap bounds them all" })),
    table(
      ["Dataset", "Definition", "Total cap", "Spent by all"],
      rows.map((a) => [a.dataset, a.definition, a.total_cap ? fmtLoss(a.total_cap) : h("span", { class: "muted", text: "none" }), fmtLoss(a.total_spent)]),
      { label: "Dataset accounting", empty: "No dataset is registered." },
    ),
  );
}

export async function budgetsPage(root, params) {
  const [{ budgets }, { principals }, { datasets }] = await Promise.all([get("/budgets"), get("/principals"), get("/datasets")]);
  const accounting = await Promise.all(datasets.map((d) => get(`/datasets/${enc(d.name)}/accounting`)));
  clear(root);
  root.append(pageHead("Budgets", "Each analyst's cap per dataset, what they spent in the current period and what remains (rounded down)."));
  const again = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  root.append(budgetForm(principals, datasets, params, again));
  const rows = budgets.map((b) => {
    const cap = mainValue(b.budget);
    const remaining = mainValue(b.remaining) ?? 0;
    return [
      b.analyst,
      b.dataset,
      fmtLoss(b.budget),
      fmtLoss(b.spent),
      td(cap ? gauge({ spent: cap - remaining, budget: cap, measure: b.definition === "zcdp" ? "ρ" : "ε" }) : "—"),
      b.refresh_days ? `${b.refresh_days} days` : "never",
    ];
  });
  root.append(h("section", { class: "card" }, h("h2", { text: "All budgets" }), table(["Analyst", "Dataset", "Budget", "Spent", "Remaining", "Renewed"], rows, { label: "All budgets", empty: "No budget is set yet." })));
  root.append(accountingCard(accounting));
}
