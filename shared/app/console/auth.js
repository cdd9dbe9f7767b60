// Signing in. `/console/config.json` says how: `local` (nothing to do), `iam` (a browser
// cannot sign SigV4 requests: the console needs the JWT authorizer), or `jwt`: OpenID Connect
// authorization code with PKCE (S256) against the JWT authorizer's issuer, discovered from
// `{issuer}/.well-known/openid-configuration`. The token lives in sessionStorage (this tab
// only, gone when it closes) and is sent as `Authorization: Bearer`.

import { base, h } from "./ui.js";

const KEY = "cronledger.console.";
const store = {
  get: (name) => sessionStorage.getItem(KEY + name),
  set: (name, value) => sessionStorage.setItem(KEY + name, value),
  drop: (...names) => names.forEach((n) => sessionStorage.removeItem(KEY + n)),
};

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function randomText(size = 32) {
  return b64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function discover(issuer) {
  const resp = await fetch(`${issuer}/.well-known/openid-configuration`);
  if (!resp.ok) throw new Error(`OIDC discovery at ${issuer} answered ${resp.status}`);
  const doc = await resp.json();
  if (!doc.authorization_endpoint || !doc.token_endpoint) {
    throw new Error("the issuer's discovery document names no authorization or token endpoint");
  }
  return doc;
}

/// Where the issuer sends the browser back: the console's own root (register this URI).
export const redirectUri = () => location.origin + base;

async function startSignIn(config) {
  const doc = await discover(config.issuer);
  const verifier = randomText(48);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = randomText(16);
  store.set("verifier", verifier);
  store.set("state", state);
  store.set("return", location.pathname + location.search);
  const url = new URL(doc.authorization_endpoint);
  const params = {
    response_type: "code", client_id: config.client_id, redirect_uri: redirectUri(),
    scope: config.scopes, state, code_challenge: challenge, code_challenge_method: "S256",
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.toString());
}

const looksLikeJwt = (t) => typeof t === "string" && t.split(".").length === 3;

async function finishSignIn(config, code, state) {
  const expected = store.get("state");
  const verifier = store.get("verifier");
  store.drop("state", "verifier");
  if (!expected || state !== expected || !verifier) {
    throw new Error("the sign-in answer does not match a sign-in this tab started; sign in again");
  }
  const doc = await discover(config.issuer);
  const body = new URLSearchParams({
    grant_type: "authorization_code", code, redirect_uri: redirectUri(),
    client_id: config.client_id, code_verifier: verifier,
  });
  const resp = await fetch(doc.token_endpoint, {
    method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" }, body,
  });
  const tokens = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(`the token endpoint refused the code: ${tokens.error || resp.status}`);
  // The authorizer checks a JWT's issuer and audience: an opaque access token cannot pass
  // it, so the ID token goes instead (its audience is the client id).
  const token = looksLikeJwt(tokens.access_token) ? tokens.access_token : tokens.id_token;
  if (!looksLikeJwt(token)) throw new Error("the issuer returned no JWT (access or ID token)");
  store.set("token", token);
  store.set("expires", String(Date.now() + 1000 * Number(tokens.expires_in || 3600)));
  const back = store.get("return") || base;
  store.drop("return");
  history.replaceState(null, "", back);
}

export function signOut() {
  store.drop("token", "expires");
}

/// Resolves to the bearer token (null locally), or renders why the console cannot proceed
/// (IAM only, a sign-in button) into `main` and resolves to undefined.
export async function authenticate(main) {
  let config;
  try {
    const resp = await fetch(`${base}/config.json`, { cache: "no-store" });
    config = await resp.json();
  } catch (e) {
    main.replaceChildren(h("p", { class: "flash-error" }, `The console's config could not be read: ${e}`));
    return undefined;
  }
  if (config.auth === "local") return null;
  if (config.auth !== "jwt") {
    main.replaceChildren(h("section", { class: "notice" },
      h("h1", {}, "The console needs the JWT authorizer"),
      h("p", {}, "This deployment's HTTP API authorizes with IAM (SigV4). A browser holds no AWS credentials to sign requests with, so the console cannot call the API."),
      h("p", {}, "Deploy with JwtIssuer and JwtAudience (and ConsoleClientId, the OIDC client registered with redirect URI ",
        h("code", {}, redirectUri()), ") to sign in here; the CLI works with either.")));
    return undefined;
  }
  const query = new URLSearchParams(location.search);
  try {
    if (query.get("code") && query.get("state")) {
      await finishSignIn(config, query.get("code"), query.get("state"));
    } else if (query.get("error")) {
      throw new Error(`the issuer refused the sign-in: ${query.get("error_description") || query.get("error")}`);
    }
  } catch (e) {
    main.replaceChildren(h("p", { class: "flash-error" }, String(e.message || e)));
    return undefined;
  }
  const token = store.get("token");
  if (token && Number(store.get("expires")) > Date.now() + 30e3) return token;
  signOut();
  main.replaceChildren(h("section", { class: "notice" },
    h("h1", {}, "Sign in"),
    h("p", {}, `The console signs in with ${config.issuer} (OpenID Connect, authorization code with PKCE).`),
    h("button", { type: "button", class: "primary", onclick: () => startSignIn(config).catch((e) => {
      main.append(h("p", { class: "flash-error" }, String(e.message || e)));
    }) }, "Sign in")));
  return undefined;
}
