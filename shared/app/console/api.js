// Calls to the `/v1` routes: the same routes, roles and audit as the CLI. With the JWT
// authorizer each call carries the signed-in bearer token; locally it carries nothing (the
// local runner answers as CRONLEDGER_LOCAL_IDENTITY).

import { apiRoot } from "./ui.js";

let bearer = null;
let onUnauthenticated = () => {};

export function useToken(token, whenRefused) {
  bearer = token;
  if (whenRefused) onUnauthenticated = whenRefused;
}

/// An answer other than 2xx: the API's `{code, message, details}` with the status.
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code ? body.code : `HTTP_${status}`;
    this.details = body ? body.details : null;
  }
}

export async function call(method, path, body, headers = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers } };
  if (bearer) init.headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(apiRoot + path, init);
  const text = await resp.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!resp.ok) {
    const error = new ApiError(resp.status, json);
    if (resp.status === 401) onUnauthenticated(error);
    throw error;
  }
  return json;
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}, headers) => call("POST", path, body, headers);

/// Every item of a paged listing (`items` and `next`), up to `maxPages` pages.
export async function all(path, maxPages = 20) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const sep = path.includes("?") ? "&" : "?";
    const answer = await get(cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path);
    items.push(...(answer.items || []));
    cursor = answer.next;
    if (!cursor) break;
  }
  return items;
}

export const enc = encodeURIComponent;
