// client.mjs: the official MCP TypeScript SDK (@modelcontextprotocol/sdk,
// pinned in package-lock.json) as an OAuth client of the gateway, driven by
// cmd/mcpgate/oauth_tsclient_test.go over stdin and stdout, one JSON object
// a line. Nothing here prints a token or a code.
//
//   node client.mjs validate          stdin: a JSON array of registration
//                                     answers; stdout: one verdict each from
//                                     the SDK's OAuthClientInformationFullSchema
//   node client.mjs flow MCP_URL REDIRECT_URL [TOOL]
//                                     sign in with the SDK's default client
//                                     metadata (no client_uri), call a tool
//                                     (TOOL, e2b_list_sandboxes by default),
//                                     refresh, and wait to be cut off
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { OAuthClientInformationFullSchema } from '@modelcontextprotocol/sdk/shared/auth.js';

const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const next = async () => {
  const { value, done } = await lines.next();
  if (done) throw new Error('stdin closed');
  return JSON.parse(value);
};

async function validate() {
  const answers = await next();
  say(answers.map((a) => {
    const r = OAuthClientInformationFullSchema.safeParse(a);
    return r.success ? { ok: true } : { ok: false, issues: r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) };
  }));
}

// Provider keeps everything in memory, as the SDK's examples do
// (simpleOAuthClientProvider.ts in its examples), and hands the authorization
// URL to the test instead of opening a browser.
class Provider {
  constructor(redirectUrl) {
    this._redirectUrl = redirectUrl;
    this.redirects = 0;
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() {
    return {
      client_name: 'TypeScript SDK e2e',
      redirect_uris: [this._redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this._client; }
  saveClientInformation(c) { this._client = c; }
  tokens() { return this._tokens; }
  saveTokens(t) { this._tokens = t; }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'client') this._client = undefined;
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'verifier') this._verifier = undefined;
  }
  redirectToAuthorization(url) {
    this.redirects++;
    say({ step: 'authorize', url: url.toString() });
  }
}

async function callTool(client, tool) {
  const res = await client.callTool({ name: tool, arguments: {} });
  return { isError: !!res.isError, structured: res.structuredContent ?? null, text: res.content?.[0]?.text ?? null };
}

async function flow(mcpURL, redirectURL, tool = 'e2b_list_sandboxes') {
  const provider = new Provider(redirectURL);
  const transport = () => new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
  const client = new Client({ name: 'mcpgate-ts-e2e', version: '0.0.0' });
  let t = transport();
  try {
    await client.connect(t);
    throw new Error('connected without signing in');
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const { code } = await next();
  await t.finishAuth(code);
  const info = provider.clientInformation();
  say({ step: 'signed-in', client_id: info.client_id, scope: provider.tokens().scope });

  await client.connect(transport());
  say({ step: 'called', ...(await callTool(client, tool)) });

  // A refresh, as the SDK does on a 401 with a refresh token in hand.
  const before = provider.tokens().access_token;
  const result = await auth(provider, { serverUrl: new URL(mcpURL) });
  say({ step: 'refreshed', result, rotated: provider.tokens().access_token !== before });
  say({ step: 'called', ...(await callTool(client, tool)) });

  await next(); // the test revokes the grant in the dashboard
  const redirectsBefore = provider.redirects;
  try {
    const r = await callTool(client, tool);
    say({ step: 'cut-off', served: true, ...r });
  } catch (e) {
    say({ step: 'cut-off', served: false, unauthorized: e instanceof UnauthorizedError,
      asked_to_sign_in_again: provider.redirects > redirectsBefore, error: String(e.message ?? e) });
  }
  await client.close().catch(() => {});
}

const [mode, ...args] = process.argv.slice(2);
try {
  if (mode === 'validate') await validate();
  else if (mode === 'flow') await flow(args[0], args[1], args[2]);
  else throw new Error('mode must be validate or flow');
  process.exit(0);
} catch (e) {
  say({ step: 'error', error: String(e && e.stack || e) });
  process.exit(1);
}
