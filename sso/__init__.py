"""Single sign-on: OpenID Connect providers (oidc.py, on mozilla-django-oidc's backend)
and a SAML 2.0 identity provider (saml.py, on pysaml2 with xmlsec1). Both hand the person
they vouched for to services.py, which applies the one set of account rules
(docs/accounts.md): the provider authenticates, the platform authorises."""
