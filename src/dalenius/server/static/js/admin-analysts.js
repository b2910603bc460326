// Curator page: analysts and curators, their tokens (issued once, revocable) and dataset grants.

import { del, enc, get, post, put } from "./api.js";
import { clear, errorAlert, fmtLoss, fmtTime, h, pageHead, secretBox, table, td, toast } from "./ui.js";

// A token just issued when creating a principal survives the page's re-render, and is shown once.
let pending = null;

function createForm(after) {
  const feedback = h("div", { "aria-live": "polite" });
  const name = h("input", { type: "text", id: "new-name", name: "name", required: true, placeholder: "alice", autocomplete: "off" });
  const role = h("select", { id: "new-role", name: "role" }, h("option", { value: "analyst", text: "analyst" }), h("option", { value: "curator", text: "curator" }));
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        clear(feedback);
        try {
          const created = await post("/principals", { name: name.value.trim(), role: role.value });
          pending = created.token;
          after(created.name);
        } catch (failure) {
          feedback.append(errorAlert(failure));
        }
      },
    },
    h("h2", { text: "New analyst or curator" }),
    h("div", { class: "row" }, h("div", { class: "field" }, h("label", { for: "new-name", text: "Name" }), name), h("div", { class: "field narrow" }, h("label", { for: "new-role", text: "Role" }), role), h("button", { type: "submit", class: "button", text: "Create and issue a token" })),
    feedback,
  );
  return form;
}

async function detailView(name, datasets, reload, showSecret) {
  const [info, { budgets }] = await Promise.all([get(`/principals/${enc(name)}`), get(`/budgets?analyst=${enc(name)}`)]);
  const feedback = h("div", { "aria-live": "polite" });
  const fail = (failure) => clear(feedback).append(errorAlert(failure));
  const tokenRows = info.tokens.map((t) => [
    td(t.id, "mono"),
    t.label,
    td(fmtTime(t.created_at), "nowrap"),
    td(t.expires_at ? fmtTime(t.expires_at) : "never", "nowrap"),
    t.revoked_at
      ? h("span", { class: "badge", text: `revoked ${fmtTime(t.revoked_at)}` })
      : t.expired
        ? h("span", { class: "badge", text: "expired" })
        : h("span", { class: "badge ok", text: "active" }),
    t.revoked_at || t.expired
      ? ""
      : h("button", {
          type: "button",
          class: "button small danger",
          text: "Revoke",
          onclick: async () => {
            if (!confirm(`Revoke token ${t.id} of ${name}? It stops working at once.`)) return;
            try {
              await del(`/principals/${enc(name)}/tokens/${enc(t.id)}`);
              toast("Token revoked");
              await reload();
            } catch (failure) {
              fail(failure);
            }
          },
        }),
  ]);
  const label = h("input", { type: "text", id: "token-label", placeholder: "e.g. laptop", "aria-label": "Label of the new token" });
  const days = h("input", { type: "number", id: "token-days", min: "1", max: "3650", step: "1", placeholder: "never", "aria-label": "Days until the new token expires (empty: never)" });
  const issue = h("button", {
    type: "button",
    class: "button secondary",
    text: "Issue a new token",
    onclick: async () => {
      try {
        const body = { label: label.value };
        if (days.value) body.expires_in_days = Number(days.value);
        const issued = await post(`/principals/${enc(name)}/tokens`, body);
        await reload();
        showSecret(issued);
      } catch (failure) {
        fail(failure);
      }
    },
  });
  const grantRows = datasets.map((d) => {
    const box = h("input", { type: "checkbox", id: `grant-${d.name}`, checked: info.grants.includes(d.name) });
    box.addEventListener("change", async () => {
      try {
        if (box.checked) await put(`/principals/${enc(name)}/grants/${enc(d.name)}`);
        else await del(`/principals/${enc(name)}/grants/${enc(d.name)}`);
        toast(box.checked ? `Granted ${d.name}` : `Grant on ${d.name} withdrawn`);
        await reload();
      } catch (failure) {
        box.checked = !box.checked;
        fail(failure);
      }
    });
    const budget = budgets.find((b) => b.dataset === d.name);
    return [h("label", { for: `grant-${d.name}`, style: "display:flex;gap:0.5rem;align-items:center;font-weight:500;margin:0" }, box, d.name), budget ? fmtLoss(budget.budget) : h("span", { class: "muted", text: "no budget" }), budget ? fmtLoss(budget.remaining) : "—", h("a", { href: `#/admin/budgets?analyst=${enc(name)}&dataset=${enc(d.name)}`, class: "small", text: "set budget" })];
  });
  return h(
    "section",
    { class: "card", id: "principal-detail" },
    h("div", { class: "card-head" }, h("h2", { text: info.name }), h("span", { class: "badge accent", text: info.role }), h("span", { class: "meta", text: `created ${fmtTime(info.created_at)} by ${info.created_by}` })),
    feedback,
    h("h3", { text: "Grants and budgets" }),
    table(["Dataset (granted?)", "Budget", "Remaining", ""], grantRows, { label: "Grants", empty: "No dataset is registered." }),
    h("h3", { text: "Tokens", style: "margin-top:1.25rem" }),
    table(["Token id", "Label", "Issued", "Expires", "State", ""], tokenRows, { label: "Tokens", empty: "No token issued." }),
    h(
      "div",
      { class: "row", style: "margin-top:0.75rem" },
      h("div", { class: "field" }, label),
      h("div", { class: "field narrow" }, h("label", { for: "token-days", text: "Expires after (days)" }), days),
      issue,
    ),
  );
}

export async function analystsPage(root, params) {
  const [{ principals }, { datasets }] = await Promise.all([get("/principals"), get("/datasets")]);
  clear(root);
  root.append(pageHead("Analysts & tokens", "Create analysts, issue and revoke their tokens, and grant them datasets. A token is shown once; the gateway keeps only its hash."));
  const issued = h("div", { id: "issued", "aria-live": "polite" });
  if (pending) {
    issued.append(secretBox(pending));
    pending = null;
  }
  const detail = h("div", { id: "detail" });
  const go = (name) => {
    const target = `#/admin/analysts?name=${enc(name)}`;
    if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = target;
  };
  root.append(createForm(go), issued);
  const everyone = h("div", {});
  const drawEveryone = (list) => {
    const rows = list.map((p) => [
      td(h("a", { href: `#/admin/analysts?name=${enc(p.name)}`, text: p.name })),
      h("span", { class: `badge ${p.role === "curator" ? "accent" : ""}`, text: p.role }),
      p.grants.length ? p.grants.join(", ") : h("span", { class: "muted", text: "none" }),
      td(String(p.tokens.filter((t) => !t.revoked_at).length), "num"),
      td(fmtTime(p.created_at), "nowrap"),
    ]);
    clear(everyone).append(h("section", { class: "card" }, h("h2", { text: "Everyone" }), table(["Name", "Role", "Grants", { label: "Active tokens", num: true }, "Created"], rows, { label: "Principals" })));
  };
  drawEveryone(principals);
  root.append(everyone, detail);
  const name = params.get("name");
  if (!name) return;
  const showSecret = (token) => {
    clear(issued).append(secretBox(token));
    issued.scrollIntoView({ block: "center" });
  };
  const refresh = async () => {
    try {
      const [view, fresh] = await Promise.all([detailView(name, datasets, refresh, showSecret), get("/principals")]);
      clear(detail).append(view);
      drawEveryone(fresh.principals);
    } catch (failure) {
      clear(detail).append(errorAlert(failure));
    }
  };
  await refresh();
  if (!issued.firstChild) detail.scrollIntoView({ block: "start" });
}
