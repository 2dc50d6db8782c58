from django.urls import path

from sso import views

urlpatterns = [
    path("oidc/callback/", views.oidc_callback, name="sso-oidc-callback"),
    path("oidc/<str:key>/login/", views.oidc_login, name="sso-oidc-login"),
    path("logout/", views.sso_logout, name="sso-logout"),
]
