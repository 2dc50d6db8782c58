from django.apps import AppConfig


class RecruitConfig(AppConfig):
    name = "recruit"
    verbose_name = "Recruitment and onboarding"
