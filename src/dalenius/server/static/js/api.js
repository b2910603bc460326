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
