#!/usr/bin/env node
// A real authorization server for eragate's OAuth tests: oidc-provider 9.13.3 (installed by
// install.sh into $OIDC_DIR; it needs Node 22), on 127.0.0.1, with
//   - RFC 8707 resource indicators: any resource gets a JWT access token (RFC 9068) whose `aud`
//     is that resource, scopes from --scopes, signed with a fresh key (random `kid`) per start;
//   - dynamic client registration (RFC 7591) open to anyone, authorization code + PKCE; a
//     registered client is not held to the `scope` it registered with (so a step-up to more
//     scopes is granted, as by a provider whose clients may ask for any resource scope);
//   - headless interactions: every login is approved as --account and every consent granted
//     (the /interaction/:uid routes below answer at once, no forms);
//   - client credentials for three pre-registered confidential clients, so tests can mint tokens
//     without a browser: `tester` / `tester-secret`, `other` / `other-secret` (a second
//     principal), and `short-lived` / `short-secret` whose access tokens live 1 s.
//
//   - RFC 7662 introspection (any of the confidential clients may ask), for --format opaque.
//   - RFC 8693 token exchange (grant urn:ietf:params:oauth:grant-type:token-exchange), for
//     `tester` and registered clients: a JWT access token of this provider (subject_token) is
//     exchanged for one with the same `sub`, `aud` = the requested `resource` (or `audience`),
//     `client_id` = the exchanging client, and `act` = {sub: that client}; 600 s.
//
//   node22 oidc_provider.mjs [--port N] [--account SUB] [--scopes "a b"] [--alg ES256|RS256|EdDSA]
//                            [--format jwt|opaque] [--key-file PATH] [--tls-cert PEM --tls-key PEM]
//
// --tls-cert/--tls-key: serve HTTPS (the issuer is then https://127.0.0.1:PORT), and the same
// provider over plain HTTP on --plain-port (0: any; "plain" in the ready line) for the test's own
// requests.
//
// --port 0 (default) picks a free port. Prints one line once listening:
//   {"listening": "http://127.0.0.1:PORT", "issuer": "http://127.0.0.1:PORT", "port": PORT, "kid": "..."}
import http from 'node:http';
import https from 'node:https';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
};
const port = Number(arg('--port', '0'));
const account = arg('--account', 'alice');
const scopes = arg('--scopes', 'mcp:read mcp:write mcp:admin');
const alg = arg('--alg', 'ES256');
const format = arg('--format', 'jwt');
// --key-file PATH: sign with the JWK in PATH (give its --alg), written there first when absent, so two
// providers (two issuers) can share one signing key.
const keyFile = arg('--key-file', '');

const oidcDir = process.env.OIDC_DIR;
if (!oidcDir) {
  console.error('OIDC_DIR is not set (source the peers env.sh)');
  process.exit(2);
}
const { default: Provider } = await import(
  pathToFileURL(path.join(oidcDir, 'node_modules/oidc-provider/lib/index.js')).href
);

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const jose = await import(pathToFileURL(path.join(oidcDir, 'node_modules/jose/dist/webapi/index.js')).href);

function signingKey() {
  const kid = crypto.randomBytes(8).toString('hex');
  const pair =
    alg === 'RS256'
      ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 })
      : alg === 'EdDSA'
        ? crypto.generateKeyPairSync('ed25519')
        : crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { ...pair.privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg };
}

// Bind first, so the issuer names the real port.
const tlsCert = arg('--tls-cert', '');
const tlsKey = arg('--tls-key', '');
const server = tlsCert
  ? https.createServer({ cert: fs.readFileSync(tlsCert), key: fs.readFileSync(tlsKey) })
  : http.createServer();
await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
const issuer = `${tlsCert ? 'https' : 'http'}://127.0.0.1:${server.address().port}`;
const plain = tlsCert ? http.createServer() : null;
if (plain) await new Promise((resolve) => plain.listen(Number(arg('--plain-port', '0')), '127.0.0.1', resolve));
const key = keyFile && fs.existsSync(keyFile) ? JSON.parse(fs.readFileSync(keyFile, 'utf8')) : signingKey();
if (keyFile && !fs.existsSync(keyFile)) fs.writeFileSync(keyFile, JSON.stringify(key));

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'tester',
      client_secret: 'tester-secret',
      grant_types: ['client_credentials', TOKEN_EXCHANGE],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'other',
      client_secret: 'other-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'short-lived',
      client_secret: 'short-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  jwks: { keys: [key] },
  cookies: { keys: [crypto.randomBytes(16).toString('hex')] },
  scopes: ['openid', 'offline_access', ...scopes.split(' ')],
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator, client) => ({
        scope: scopes,
        audience: resourceIndicator,
        accessTokenTTL: client.clientId === 'short-lived' ? 1 : 600,
        accessTokenFormat: format,
        jwt: { sign: { alg } },
      }),
    },
  },
  enabledJWA: { authorizationSigningAlgValues: [alg], idTokenSigningAlgValues: [alg] },
  clientDefaults: { id_token_signed_response_alg: alg },
  // Runs for every registration: forget the registered `scope`, which would be an allowlist.
  extraClientMetadata: {
    properties: ['x_eragate_test'],
    validator: (_ctx, _key, _value, metadata) => {
      delete metadata.scope;
    },
  },
  pkce: { required: () => true },
});

// RFC 8693: a JWT access token of ours, for one aimed at the requested resource.
const tokenError = (ctx, status, error, description) => {
  ctx.status = status;
  ctx.body = { error, error_description: description };
};
async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE || !params.subject_token) {
    return tokenError(ctx, 400, 'invalid_request', 'subject_token must be an access token');
  }
  let subject;
  try {
    const publicKey = await jose.importJWK({ ...key, d: undefined }, alg);
    ({ payload: subject } = await jose.jwtVerify(params.subject_token, publicKey, { issuer }));
  } catch (error) {
    return tokenError(ctx, 400, 'invalid_grant', `subject_token: ${error.message}`);
  }
  const audience = params.resource || params.audience;
  if (!audience) return tokenError(ctx, 400, 'invalid_target', 'name the resource or audience');
  const privateKey = await jose.importJWK(key, alg);
  const now = Math.floor(Date.now() / 1000);
  const claims = { sub: subject.sub, client_id: client.clientId, act: { sub: client.clientId } };
  if (params.scope) claims.scope = params.scope;
  const accessToken = await new jose.SignJWT(claims)
    .setProtectedHeader({ alg, kid: key.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt(now)
    .setExpirationTime(now + 600)
    .setJti(crypto.randomBytes(12).toString('hex'))
    .sign(privateKey);
  ctx.body = { access_token: accessToken, issued_token_type: ACCESS_TOKEN_TYPE, token_type: 'Bearer', expires_in: 600 };
}
provider.registerGrantType(
  TOKEN_EXCHANGE,
  tokenExchange,
  ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope'],
);

// Approves every interaction on the spot: login as `account`, consent to all that was asked.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, wanted] of Object.entries(missing.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, wanted.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
const serve = (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => {
      console.error(`interaction failed: ${error.stack || error}`);
      res.statusCode = 500;
      res.end(String(error));
    });
    return;
  }
  callback(req, res);
};
server.on('request', serve);
if (plain) plain.on('request', serve);
provider.on('server_error', (_ctx, error) => console.error(`server_error: ${error.stack || error}`));

// Only the ready line goes to stdout (the harness stops reading after it); the rest to stderr.
console.log = console.info = (...items) => console.error(...items);
process.stdout.on('error', () => {});
process.stdout.write(`${JSON.stringify({
    listening: issuer,
    issuer,
    port: server.address().port,
    kid: key.kid,
    ...(plain ? { plain: `http://127.0.0.1:${plain.address().port}` } : {}),
  })}\n`);
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
