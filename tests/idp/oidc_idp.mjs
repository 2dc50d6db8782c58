// The OpenID Connect provider of the SSO tests (tests/sso/conftest.py starts it):
// the npm package oidc-provider with its development login pages, on 127.0.0.1.
//
//   node oidc_idp.mjs PORT   with IDP_CLIENTS and IDP_ACCOUNTS (JSON) in the environment
//
// IDP_ACCOUNTS maps a login (any password is accepted) to its claims; IDP_CLIENTS is
// oidc-provider's client list. Prints "ready <issuer>" once it accepts connections.
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;
const accounts = JSON.parse(process.env.IDP_ACCOUNTS || '{}');
const clients = JSON.parse(process.env.IDP_CLIENTS || '[]');
// Seconds an ID token lives, per client (default one hour): a test of expiry names a short one.
const idTokenTtl = JSON.parse(process.env.IDP_ID_TOKEN_TTL || '{}');

const provider = new Provider(issuer, {
  clients,
  async findAccount(ctx, id) {
    const account = accounts[id];
    if (!account) return undefined;
    return { accountId: id, async claims() { return { sub: id, ...account }; } };
  },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // Every claim in the ID token too, so a client need not call userinfo to see them.
  conformIdTokenClaims: false,
  ttl: {
    IdToken(ctx, token, client) { return idTokenTtl[client.clientId] || 3600; },
  },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  pkce: { required: () => true },
});
// Plain HTTP on 127.0.0.1 in the tests: the provider's cookies are not "secure".
provider.proxy = false;

const server = provider.listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
