from django.apps import AppConfig


class RecruitConfig(AppConfig):
    name = "recruit"
    verbose_name = "Recruitment and onboarding"

    def ready(self):
        from annotate.gates import register_item_gate
        from recruit.gates import ONBOARDING_GATE

        register_item_gate(ONBOARDING_GATE)
