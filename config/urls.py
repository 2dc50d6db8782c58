from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from annotate import views as annotate_views
from annotate.urls import api_urlpatterns

urlpatterns = [
    path("", annotate_views.home, name="home"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("rate/", include("annotate.urls")),
    path("studies/", include("annotate.study_urls")),
    path("analysis/", include("analysis.urls")),
    path("api/", include(api_urlpatterns)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
