"""The SAML 2.0 identity provider of the SSO tests (tests/sso/conftest.py starts it):
pysaml2's IdP (saml2.server.Server), signing with xmlsec1, on localhost.

    python saml_idp.py PORT   with IDP_KEY, IDP_CERT (PEM files), IDP_ACCOUNTS (JSON) and
                              IDP_ACS (JSON list of the assertion consumer URLs it answers)

GET /metadata is its metadata; GET /sso/redirect takes an AuthnRequest (HTTP-Redirect) and
shows a login form; POST /sso/login answers (HTTP-POST) for the login typed, any password.
A test may add `variant` to the request's URL to get a faulty answer from the same
provider: "unsigned" (no signature), "other-audience" (for another service provider),
"brief" (valid for one second). Prints "ready <base URL>" once it accepts connections.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import sys
from socketserver import ThreadingMixIn
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from saml2 import BINDING_HTTP_POST, BINDING_HTTP_REDIRECT
from saml2.config import IdPConfig
from saml2.metadata import create_metadata_string
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS, NameID
from saml2.server import Server

PORT = int(sys.argv[1])
BASE = f"http://localhost:{PORT}"
ACCOUNTS = json.loads(os.environ.get("IDP_ACCOUNTS", "{}"))
ACS = set(json.loads(os.environ.get("IDP_ACS", "[]")))


def idp_config(lifetime: dict) -> IdPConfig:
    config = IdPConfig()
    config.load(
        {
            "entityid": f"{BASE}/metadata",
            "xmlsec_binary": shutil.which("xmlsec1"),
            "key_file": os.environ["IDP_KEY"],
            "cert_file": os.environ["IDP_CERT"],
            "metadata": {},
            "service": {
                "idp": {
                    "name": "Test university",
                    "endpoints": {"single_sign_on_service": [(f"{BASE}/sso/redirect", BINDING_HTTP_REDIRECT)]},
                    "name_id_format": [NAMEID_FORMAT_EMAILADDRESS],
                    "policy": {"default": {"lifetime": lifetime, "attribute_restrictions": None}},
                }
            },
        }
    )
    return config


SERVER = Server(config=idp_config({"minutes": 15}))
# The same provider with its assertions valid for one second.
BRIEF = Server(config=idp_config({"seconds": 1}))


def page(start_response, body: str, status: str = "200 OK"):
    start_response(status, [("Content-Type", "text/html; charset=utf-8")])
    return [body.encode()]


def login_form(query: dict) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(query.get(name, [""])[0])}">'
        for name in ("SAMLRequest", "RelayState", "variant")
    )
    return (
        "<!doctype html><title>Test university</title><h1>Test university</h1>"
        f'<form method="post" action="/sso/login">{hidden}'
        '<label>Login <input name="login"></label> <label>Password <input name="password" type="password"></label>'
        '<button type="submit">Sign in</button></form>'
    )


KNOWN: set[str] = set()


def know_service_provider(server: Server, entity_id: str, acs: str) -> None:
    """The provider learns a service provider from its first request (a real one is given
    the SP's metadata by its administrator): its entity ID at an allowed ACS address."""
    if entity_id in KNOWN:
        return
    server.metadata.load(
        "inline",
        '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" '
        f'entityID="{html.escape(entity_id)}"><md:SPSSODescriptor '
        'protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">'
        '<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" '
        f'Location="{html.escape(acs)}" index="0"/></md:SPSSODescriptor></md:EntityDescriptor>',
    )
    KNOWN.add(entity_id)


def answer(form: dict) -> str:
    variant = form.get("variant", [""])[0]
    server = BRIEF if variant == "brief" else SERVER
    request = server.parse_authn_request(form["SAMLRequest"][0], BINDING_HTTP_REDIRECT).message
    acs = request.assertion_consumer_service_url
    if acs not in ACS:
        raise ValueError(f"unknown assertion consumer service {acs}")
    account = ACCOUNTS[form["login"][0]]
    audience = "https://another-service.example/metadata" if variant == "other-audience" else request.issuer.text
    know_service_provider(server, audience, acs)
    response = server.create_authn_response(
        identity={"mail": [account["email"]], "groups": account.get("groups", [])},
        in_response_to=request.id,
        destination=acs,
        sp_entity_id=audience,
        name_id=NameID(format=NAMEID_FORMAT_EMAILADDRESS, text=account["email"]),
        authn={"class_ref": "urn:oasis:names:tc:SAML:2.0:ac:classes:Password"},
        sign_assertion=variant != "unsigned",
        sign_response=False,
    )
    relay = form.get("RelayState", [""])[0]
    return server.apply_binding(BINDING_HTTP_POST, str(response), acs, relay, response=True)["data"]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/metadata":
        start_response("200 OK", [("Content-Type", "application/samlmetadata+xml")])
        return [create_metadata_string(None, config=SERVER.config, valid=None, sign=False)]
    if path == "/sso/redirect":
        return page(start_response, login_form(parse_qs(environ["QUERY_STRING"])))
    if path == "/sso/login" and environ["REQUEST_METHOD"] == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        form = parse_qs(environ["wsgi.input"].read(length).decode())
        return page(start_response, answer(form))
    return page(start_response, "not found", "404 Not Found")


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


if __name__ == "__main__":
    httpd = make_server("localhost", PORT, app, server_class=ThreadingServer, handler_class=Quiet)
    print(f"ready {BASE}", flush=True)
    httpd.serve_forever()
