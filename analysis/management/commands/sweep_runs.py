from django.core.management.base import BaseCommand

from core.commands import counted


class Command(BaseCommand):
    help = (
        "Look at every unfinished run once (what Celery beat does every minute; for cron where no beat "
        "runs): exports, imports, evaluator and judge runs, generation and answer jobs that no worker took "
        "within RUN_CLAIM_TIMEOUT are queued again once, then failed (the task queue is unavailable); "
        "runs whose worker died are failed (stopped: the worker died). Study reports are looked at by "
        "every request for them. It lives in analysis, the one app that may import every other."
    )

    def handle(self, *args, **options):
        from datasets.tasks import sweep_dataset_runs_task
        from generation.tasks import sweep_generation_runs_task

        changed = sweep_dataset_runs_task() + sweep_generation_runs_task()
        self.stdout.write(f"{counted(changed, 'run')} changed.")
