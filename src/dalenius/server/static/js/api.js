// The console's only way to the gateway: the public JSON API under /v1, with the caller's token.
// Anything the console does, a script can do with the same requests.

const TOKEN_KEY = "dalenius.token";

export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.status = status;
    this.error = error || { code: "network_error", message: this.message };
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let onUnauthorized = () => {};

export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const current = token();
  if (current) headers.Authorization = `Bearer ${current}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(`/v1${path}`, init);
  } catch (failure) {
    throw new ApiError(0, {
      code: "network_error",
      message: "The gateway cannot be reached.",
      fix: "check that `dalenius serve` is still running, then try again.",
    });
  }
  if (response.status === 204) return null;
  let payload = null;
  try {
    payload = await response.json();
  } catch (failure) {
    payload = null;
  }
  if (!response.ok) {
    const error = payload && payload.error ? payload.error : { code: "http_error", message: `HTTP ${response.status}` };
    if (response.status === 401) onUnauthorized(error);
    throw new ApiError(response.status, error);
  }
  return payload;
}

export const get = (path) => api("GET", path);
export const post = (path, body) => api("POST", path, body ?? {});
export const put = (path, body) => api("PUT", path, body ?? {});
export const del = (path) => api("DELETE", path);

export function enc(part) {
  return encodeURIComponent(part);
}

// A POST answered as NDJSON (one JSON document a line): each line goes to onLine as it arrives,
// so a long computation can show its progress. Refusals before the stream starts are thrown as
// by api(); an {"error": …} line ends the stream and is thrown the same way.
export async function postStream(path, body, onLine) {
  const headers = { Accept: "application/x-ndjson", "Content-Type": "application/json" };
  const current = token();
  if (current) headers.Authorization = `Bearer ${current}`;
  let response;
  try {
    response = await fetch(`/v1${path}`, { method: "POST", headers, body: JSON.stringify(body ?? {}) });
  } catch (failure) {
    throw new ApiError(0, { code: "network_error", message: "The gateway cannot be reached.", fix: "check that `dalenius serve` is still running, then try again." });
  }
  if (!response.ok) {
    const payload = await response.json().catch(() => null);
    const error = payload && payload.error ? payload.error : { code: "http_error", message: `HTTP ${response.status}` };
    if (response.status === 401) onUnauthorized(error);
    throw new ApiError(response.status, error);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  let last = null;
  for (;;) {
    const { done, value } = await reader.read();
    pending += decoder.decode(value || new Uint8Array(), { stream: !done });
    const lines = pending.split("\n");
    pending = lines.pop();
    for (const line of lines.filter((l) => l.trim())) {
      last = JSON.parse(line);
      if (last.error) throw new ApiError(200, last.error);
      onLine(last);
    }
    if (done) return last;
  }
}
