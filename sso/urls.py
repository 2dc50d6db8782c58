from django.urls import path

from sso import views

urlpatterns = [
    path("oidc/callback/", views.oidc_callback, name="sso-oidc-callback"),
    path("oidc/<str:key>/login/", views.oidc_login, name="sso-oidc-login"),
    path("saml/login/", views.saml_login, name="sso-saml-login"),
    path("saml/acs/", views.saml_acs, name="sso-saml-acs"),
    path("saml/metadata/", views.saml_metadata, name="sso-saml-metadata"),
    path("logout/", views.sso_logout, name="sso-logout"),
]
