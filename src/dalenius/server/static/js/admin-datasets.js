// Curator page: register a dataset by the path of its catalog on the server, set its total cap,
// or remove it (its budgets and ledger records stay).

import { del, enc, get, post, put } from "./api.js";
import { clear, errorAlert, fmtLoss, fmtTime, h, pageHead, table, td, toast } from "./ui.js";

function registerForm(done) {
  const feedback = h("div", { "aria-live": "polite" });
  const path = h("input", { type: "text", id: "catalog-path", name: "catalog", required: true, placeholder: "/srv/data/adult.toml", autocomplete: "off" });
  const definition = h("select", { id: "catalog-definition", name: "definition" }, h("option", { value: "", text: "default" }), h("option", { value: "pure", text: "pure (ε)" }), h("option", { value: "approx", text: "approx (ε, δ)" }), h("option", { value: "zcdp", text: "zCDP (ρ)" }));
  return h(
    "form",
    {
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        clear(feedback);
        const body = { catalog: path.value.trim() };
        if (definition.value) body.definition = definition.value;
        try {
          const registered = await post("/datasets", body);
          toast(`Registered ${registered.name}`);
          done();
        } catch (failure) {
          feedback.append(errorAlert(failure));
        }
      },
    },
    h("h2", { text: "Register a dataset" }),
    h("p", { class: "small muted", text: "The catalog file (TOML) must be readable by the gateway; relative paths are read from the configuration file's folder. It is checked before anything is recorded." }),
    h("div", { class: "row" }, h("div", { class: "field" }, h("label", { for: "catalog-path", text: "Catalog path on the server" }), path), h("div", { class: "field narrow" }, h("label", { for: "catalog-definition", text: "Accounting" }), definition), h("button", { type: "submit", class: "button", text: "Register" })),
    feedback,
  );
}

function capControls(name, accounting, fail, done) {
  const value = h("input", { type: "text", inputmode: "decimal", placeholder: accounting.definition === "zcdp" ? "ρ" : "ε", "aria-label": `Total cap of ${name}` });
  const set = h("button", {
    type: "button",
    class: "button small secondary",
    text: "Set cap",
    onclick: async () => {
      try {
        const body = accounting.definition === "zcdp" ? { rho: value.value.trim() } : { epsilon: value.value.trim() };
        if (accounting.definition === "approx") body.delta = "0";
        await put(`/datasets/${enc(name)}/total-cap`, body);
        toast(`Total cap of ${name} set`);
        done();
      } catch (failure) {
        fail(failure);
      }
    },
  });
  const lift = accounting.total_cap
    ? h("button", {
        type: "button",
        class: "button small danger",
        text: "Lift",
        onclick: async () => {
          try {
            await del(`/datasets/${enc(name)}/total-cap`);
            done();
          } catch (failure) {
            fail(failure);
          }
        },
      })
    : null;
  return h("div", { class: "cap-controls" }, h("span", { class: "nowrap", text: accounting.total_cap ? fmtLoss(accounting.total_cap) : "none" }), value, set, lift);
}

// Failures after the data gate: each was charged and is an incident (the audit trail has the
// engine's message). Fail closed: such a failure also exhausts that analyst's budget here.
function failureControls(name, accounting, fail, done) {
  const count = accounting.failures || 0;
  const badge = h("a", { href: `#/admin/ledger?view=audit&dataset=${enc(name)}`, class: `badge ${count ? "bad" : ""}`, title: "requests that failed after reading the data (charged); see the audit trail", text: String(count) });
  const toggle = h("button", {
    type: "button",
    class: `button small ${accounting.fail_closed ? "danger" : "secondary"}`,
    text: accounting.fail_closed ? "Fails closed" : "Fails open",
    title: "closed: a failure after the data gate also exhausts that analyst's budget on this dataset",
    onclick: async () => {
      try {
        await put(`/datasets/${enc(name)}/fail-closed`, { fail_closed: !accounting.fail_closed });
        toast(`${name} now fails ${accounting.fail_closed ? "open" : "closed"}`);
        done();
      } catch (failure) {
        fail(failure);
      }
    },
  });
  return h("div", { class: "cap-controls" }, badge, toggle);
}

// The smallest ε one query may spend on the dataset: the gateway's floor, or the curator's own.
function floorControls(name, accounting, fail, done) {
  const value = h("input", { type: "text", inputmode: "decimal", placeholder: "ε", "aria-label": `Smallest ε per query on ${name}` });
  const set = h("button", {
    type: "button",
    class: "button small secondary",
    text: "Set",
    onclick: async () => {
      try {
        if (value.value.trim()) await put(`/datasets/${enc(name)}/min-epsilon`, { epsilon: value.value.trim() });
        else await del(`/datasets/${enc(name)}/min-epsilon`);
        toast(`Floor on ${name} updated`);
        done();
      } catch (failure) {
        fail(failure);
      }
    },
  });
  const shown = accounting.min_epsilon === undefined || accounting.min_epsilon === null ? "—" : `ε ≥ ${accounting.min_epsilon}`;
  return h("div", { class: "cap-controls" }, h("span", { class: "nowrap", text: shown }), value, set);
}

export async function adminDatasetsPage(root) {
  const { datasets } = await get("/datasets");
  const accounting = await Promise.all(datasets.map((d) => get(`/datasets/${enc(d.name)}/accounting`)));
  clear(root);
  root.append(pageHead("Manage datasets", "Datasets are registered by catalog; analysts see only those granted to them."));
  const again = () => window.dispatchEvent(new HashChangeEvent("hashchange"));
  const feedback = h("div", { "aria-live": "polite" });
  const fail = (failure) => clear(feedback).append(errorAlert(failure));
  root.append(registerForm(again));
  const rows = datasets.map((d, i) => [
    td(h("a", { href: `#/datasets?name=${enc(d.name)}`, text: d.name })),
    d.available ? h("span", { class: "mono small", text: d.tables.join(", ") }) : h("span", { class: "badge bad", title: d.problem || "", text: "cannot be opened" }),
    td(d.catalog || "", "sql"),
    td(`${fmtTime(d.registered_at)} by ${d.registered_by || "?"}`, "small"),
    td(capControls(d.name, accounting[i], fail, again)),
    td(floorControls(d.name, accounting[i], fail, again)),
    td(fmtLoss(accounting[i].total_spent), "nowrap"),
    td(failureControls(d.name, accounting[i], fail, again)),
    h("button", {
      type: "button",
      class: "button small danger",
      text: "Remove",
      onclick: async () => {
        if (!confirm(`Remove ${d.name}? Grants on it are withdrawn; budgets and the ledger are kept.`)) return;
        try {
          await del(`/datasets/${enc(d.name)}`);
          toast(`Removed ${d.name}`);
          again();
        } catch (failure) {
          fail(failure);
        }
      },
    }),
  ]);
  root.append(feedback, h("section", { class: "card" }, h("h2", { text: "Registered datasets" }), table(["Name", "Tables", "Catalog", "Registered", "Total cap", "Smallest ε per query", "Spent by all", "Failures after the gate", ""], rows, { label: "Registered datasets", empty: "No dataset is registered yet." })));
  for (const d of datasets.filter((x) => x.problem)) root.append(errorAlert({ error: { code: "dataset_unavailable", message: `${d.name}: ${d.problem}` } }));
}
