// The console's shell: sign-in, navigation by URL hash, and the pages for each role.

import { ApiError, get, setToken, token, whenUnauthorized } from "./api.js";
import { clear, errorAlert, h, loading } from "./ui.js";
import { queryPage } from "./query.js";
import { datasetsPage } from "./datasets.js";
import { budgetPage } from "./history.js";
import { analystsPage } from "./admin-analysts.js";
import { budgetsPage } from "./admin-budgets.js";
import { ledgerPage } from "./admin-ledger.js";
import { adminDatasetsPage } from "./admin-datasets.js";
import { ldpPage } from "./ldp.js";
import { releasesPage } from "./releases.js";
import { anonymityPage } from "./anonymity.js";
import { attacksPage } from "./attacks.js";

export const state = { me: null };

const PAGES = {
  "/query": { title: "Ask a query", render: queryPage },
  "/datasets": { title: "Datasets", render: datasetsPage },
  "/budget": { title: "Budget & history", render: budgetPage },
  "/ldp": { title: "Local DP", render: ldpPage },
  "/attacks": { title: "Attack lab", render: attacksPage },
  "/releases": { title: "Releases", render: releasesPage },
  "/admin/analysts": { title: "Analysts & tokens", render: analystsPage, curator: true },
  "/admin/budgets": { title: "Budgets", render: budgetsPage, curator: true },
  "/admin/datasets": { title: "Manage datasets", render: adminDatasetsPage, curator: true },
  "/admin/ledger": { title: "Ledger & audit", render: ledgerPage, curator: true },
  "/admin/anonymity": { title: "Anonymity", render: anonymityPage, curator: true },
};

const main = () => document.getElementById("main");

function route() {
  const hash = location.hash.replace(/^#/, "") || "/query";
  const [path, query = ""] = hash.split("?");
  return { path, params: new URLSearchParams(query) };
}

function renderNav(current) {
  const nav = document.getElementById("nav");
  clear(nav);
  const link = (path) =>
    h("a", { href: `#${path}`, "aria-current": current === path ? "page" : null, text: PAGES[path].title });
  nav.append(h("div", { class: "group" }, h("p", { class: "group-title", text: "Analysis" }), link("/query"), link("/datasets"), link("/budget"), link("/releases"), link("/ldp")));
  nav.lastChild.append(link("/attacks"));
  if (state.me && state.me.role === "curator") {
    nav.append(
      h(
        "div",
        { class: "group" },
        h("p", { class: "group-title", text: "Curation" }),
        link("/admin/analysts"),
        link("/admin/budgets"),
        link("/admin/datasets"),
        link("/admin/ledger"),
        link("/admin/anonymity"),
      ),
    );
  }
  nav.hidden = false;
}

function renderSession() {
  const box = document.getElementById("session");
  const who = document.getElementById("who");
  clear(who);
  if (!state.me) {
    box.hidden = true;
    return;
  }
  who.append(h("span", { class: "name", text: state.me.name }), h("span", { class: "role", text: state.me.role }));
  box.hidden = false;
}

function signInPage(message) {
  document.getElementById("nav").hidden = true;
  const root = clear(main());
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", spellcheck: "false", placeholder: "dlt_…", required: true });
  const feedback = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    {
      class: "card",
      onsubmit: async (event) => {
        event.preventDefault();
        clear(feedback);
        setToken(input.value.trim());
        try {
          state.me = await get("/me");
          renderSession();
          if (!location.hash || location.hash === "#/signin") location.hash = "#/query";
          else render();
        } catch (failure) {
          setToken(null);
          feedback.append(errorAlert(failure));
        }
      },
    },
    h("h1", { text: "Sign in" }),
    h("p", { class: "lede", text: "Paste the API token a curator gave you. It stays in this browser tab only and is sent to this gateway alone." }),
    h("div", { class: "field" }, h("label", { for: "token", text: "API token" }), input),
    feedback,
    h("div", { class: "actions" }, h("button", { class: "button", type: "submit", text: "Sign in" }), h("span", { class: "spacer" }), h("a", { href: "/v1/openapi.json", class: "small", text: "API reference (OpenAPI)" })),
  );
  root.append(h("div", { class: "signin" }, message ? h("div", { class: "notice", role: "alert", text: message }) : null, form));
  input.focus();
}

async function render() {
  if (!token()) {
    signInPage();
    return;
  }
  if (!state.me) {
    try {
      state.me = await get("/me");
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 401) return;
      clear(main()).append(errorAlert(failure));
      return;
    }
    renderSession();
  }
  const { path, params } = route();
  const page = PAGES[path] || PAGES["/query"];
  renderNav(PAGES[path] ? path : "/query");
  // Each render gets its own container, so a slow page that finishes after the user moved on
  // fills a detached node instead of the current page.
  const root = h("div", { class: "page", "data-page": path });
  clear(main()).append(root);
  if (page.curator && state.me.role !== "curator") {
    root.append(errorAlert({ error: { code: "forbidden", message: "This page is for curators.", fix: "sign in with a curator's token." } }));
    return;
  }
  document.title = `${page.title} · Dalenius`;
  root.append(loading());
  try {
    await page.render(root, params, state);
  } catch (failure) {
    clear(root).append(errorAlert(failure));
  }
}

function signOut(message) {
  setToken(null);
  state.me = null;
  renderSession();
  signInPage(message);
}

// A token refused on the first attempt was never accepted: say so, rather than "no longer".
whenUnauthorized(() =>
  signOut(
    state.me
      ? "Your token is no longer accepted (revoked or expired). Sign in again."
      : "That token was not accepted: check that you copied all of it, or ask a curator for a new one (it may be revoked or expired).",
  ),
);

window.addEventListener("hashchange", render);
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("sign-out").addEventListener("click", () => signOut());
  render();
});
