// Small DOM helpers, number and loss formatting, and the one way the console shows an error.
// Text is always inserted as text (never as HTML), so nothing a user or a dataset supplies can
// inject markup.

export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    // Through the CSSOM: the console's Content-Security-Policy forbids inline style attributes.
    else if (key === "style") node.style.cssText = value;
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

// -- numbers -------------------------------------------------------------------------------

export function fmt(value, digits = 4) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (Number.isInteger(value) && abs < 1e15) return value.toLocaleString("en-US");
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e9)) return value.toExponential(2);
  if (abs >= 1000) return value.toLocaleString("en-US", { maximumFractionDigits: 1 });
  return value.toLocaleString("en-US", { maximumSignificantDigits: digits });
}

export function fmtEps(value) {
  if (value === null || value === undefined) return "—";
  return Number(value).toLocaleString("en-US", { maximumSignificantDigits: 6 });
}

function fmtSmall(value) {
  const number = Number(value);
  return number !== 0 && Math.abs(number) < 1e-3 ? number.toExponential(0).replace("e-", "e−") : fmtEps(number);
}

// A loss as people read it; a δ of zero (a pure query charged to an (ε, δ) budget) is left out.
export function fmtLoss(loss) {
  if (!loss) return "none";
  const parts = [];
  if (loss.epsilon !== undefined && loss.epsilon !== null) parts.push(`ε = ${fmtEps(loss.epsilon)}`);
  if (loss.delta !== undefined && loss.delta !== null && Number(loss.delta) !== 0) parts.push(`δ = ${fmtSmall(loss.delta)}`);
  if (loss.rho !== undefined && loss.rho !== null) parts.push(`ρ = ${fmtEps(loss.rho)}`);
  return parts.join(", ") || "ε = 0";
}

export function mainValue(loss) {
  if (!loss) return null;
  if (loss.epsilon !== undefined && loss.epsilon !== null) return loss.epsilon;
  if (loss.rho !== undefined && loss.rho !== null) return loss.rho;
  return null;
}

export function fmtTime(text) {
  if (!text) return "—";
  const when = new Date(text);
  if (Number.isNaN(when.getTime())) return text;
  return when.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// -- feedback ------------------------------------------------------------------------------

let toastTimer = null;

export function toast(message) {
  const node = document.getElementById("toast");
  node.textContent = message;
  node.classList.add("show");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => node.classList.remove("show"), 2600);
}

const TITLES = {
  query_error: "The query cannot be answered",
  privacy_refusal: "Refused to protect privacy",
  budget_exceeded: "Budget exceeded — nothing was spent",
  bounds_not_chosen: "Bounds still to be chosen — nothing was spent",
  public_answer: "Free — answered from the catalog",
  invalid_loss: "Invalid privacy parameter",
  configuration_error: "Invalid setting",
  catalog_error: "Catalog problem",
  invalid_request: "Malformed request",
  unauthenticated: "Not signed in",
  forbidden: "Not allowed",
  not_found: "Not found",
  conflict: "Conflict",
  rate_limited: "Too many requests",
  request_too_large: "Request too large",
  request_in_progress: "Request still in progress",
  dataset_unavailable: "Dataset unavailable",
  execution_error: "Engine failure — nothing was spent",
  evaluation_failed: "Failed after reading the data — the loss was charged",
  deadline: "Deadline passed — the loss was charged",
  network_error: "Gateway unreachable",
  internal_error: "Internal error",
};

// The SQL text with the offending span marked and a caret line, as the command line shows it.
function pointer(sql, line, column, span) {
  const lines = (sql || "").split("\n");
  if (!line || line < 1 || line > lines.length) return null;
  const text = lines[line - 1];
  const start = Math.max((column || 1) - 1, 0);
  const width = Math.max((span || "").length, 1);
  const pre = h("pre", { class: "pointer", "aria-label": `line ${line}, column ${column}` });
  pre.append(
    document.createTextNode(text.slice(0, start)),
    h("mark", { text: text.slice(start, start + width) || " " }),
    document.createTextNode(text.slice(start + width)),
    document.createTextNode("\n"),
    h("span", { class: "caret", text: " ".repeat(start) + "^".repeat(width) }),
  );
  return pre;
}

export function errorAlert(failure, sql) {
  const error = (failure && failure.error) || { code: "internal_error", message: String(failure) };
  const title = TITLES[error.code] || "Request failed";
  const gentle = ["budget_exceeded", "rate_limited", "bounds_not_chosen", "public_answer"];
  const kind = gentle.includes(error.code) ? "warn" : "bad";
  const where = error.line ? ` (line ${error.line}, column ${error.column})` : "";
  return h(
    "div",
    { class: `alert ${kind}`, role: "alert", "data-code": error.code },
    h("h3", {}, h("span", { text: title }), h("span", { class: "badge bad", text: error.code })),
    h("p", { class: "message", text: error.message }),
    error.line && sql ? pointer(sql, error.line, error.column, error.span) : null,
    error.clause ? h("p", {}, h("span", { class: "label", text: "Clause: " }), error.clause + where) : null,
    error.why ? h("p", { class: "why" }, h("span", { class: "label", text: "Why: " }), error.why) : null,
    error.fix ? h("p", { class: "fix" }, h("span", { class: "label", text: "Fix: " }), error.fix) : null,
    error.request_id ? h("p", { class: "small muted", text: `request ${error.request_id}` }) : null,
  );
}

export function loading(text = "Loading…") {
  return h("p", { class: "muted" }, h("span", { class: "spinner", "aria-hidden": "true" }), " ", text);
}

export function pageHead(title, lede, ...extra) {
  return h("div", { class: "page-head" }, h("div", {}, h("h1", { text: title }), lede ? h("p", { class: "lede", text: lede }) : null), h("div", { class: "spacer" }), ...extra);
}

export function table(headers, rows, options = {}) {
  const head = h("tr", {}, headers.map((cell) => h("th", { scope: "col", class: cell.num ? "num" : null, text: cell.label ?? cell })));
  const body = rows.length
    ? rows.map((cells) => h("tr", {}, cells.map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : h("td", {}, cell)))))
    : [h("tr", {}, h("td", { colspan: headers.length, class: "empty", text: options.empty || "Nothing yet." }))];
  return h("div", { class: "table-wrap" }, h("table", { class: "data", "aria-label": options.label || null }, h("thead", {}, head), h("tbody", {}, body)));
}

export function td(content, cls) {
  return h("td", { class: cls || null }, content);
}

export function statusBadge(status) {
  const kinds = { committed: "ok", answered: "ok", cached: "accent", pending: "warn", reserved: "warn", rolled_back: "", returned: "", charged: "warn", failed: "bad", deadline: "bad", exhausted: "bad", refused: "bad", lost: "bad" };
  return h("span", { class: `badge ${kinds[status] ?? ""}`, text: status.replace("_", " ") });
}

export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast("Copied to the clipboard");
  } catch (failure) {
    toast("Select the text and copy it by hand");
  }
}

export function secretBox(issued) {
  return h(
    "div",
    { class: "alert ok", role: "status" },
    h("h3", { text: `New token for ${issued.principal}` }),
    h("p", { class: "small", text: "Shown once: the gateway keeps only a hash. Copy it now and hand it over securely." }),
    h("div", { class: "secret" }, h("code", { class: "token-text", text: issued.token }), h("button", { type: "button", class: "button small secondary", onclick: () => copy(issued.token), text: "Copy" })),
  );
}
