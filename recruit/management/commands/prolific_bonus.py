from decimal import Decimal, InvalidOperation

from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from recruit import panel
from recruit.management.commands._prolific import participants_of, study_of


def _cents(value: str) -> int:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise CommandError(f"--amount must be a number such as 1.50, not {value!r}.") from None
    if amount != amount.quantize(Decimal("0.01")):
        raise CommandError("--amount has at most two decimals.")
    return int(amount * 100)


class Command(BaseCommand):
    help = (
        "Pay a participant a bonus through Prolific exactly once: the intent is recorded (one per "
        "participant and reason), set up as a bulk bonus payment, then paid; run again after a "
        "failure, it reconciles with Prolific first and never pays twice."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="the study's slug")
        parser.add_argument("--participant", required=True, metavar="PROLIFIC_PID")
        parser.add_argument("--amount", required=True, help="in the study's currency, e.g. 1.50")
        parser.add_argument("--reason", required=True, help="why; one bonus per participant and reason")
        parser.add_argument(
            "--not-paid",
            action="store_true",
            help="release an unconfirmed payment you checked on Prolific was not made, then pay it",
        )

    def handle(self, *args, **options):
        study = study_of(options["study"])
        (participant,) = participants_of(study, [options["participant"]])
        try:
            bonus = panel.record_bonus(
                participant=participant, amount_cents=_cents(options["amount"]), reason=options["reason"]
            )
            if options["not_paid"]:
                panel.release_unconfirmed_bonus(bonus=bonus)
            result = panel.pay_bonus(bonus=bonus)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(
            f"Bonus {bonus.amount_cents / 100:.2f} ({result.bonus.get_status_display()}): {result.message}"
        )
