from django.core.management.base import BaseCommand, CommandError

from market.audit.selectors import audit_chain_verify


class Command(BaseCommand):
    help = "Verify the audit log's hash chain; exits non-zero when an entry was edited, deleted or reordered."

    def add_arguments(self, parser):
        parser.add_argument(
            "--expect-head",
            default=None,
            help="A head hash printed by an earlier run: also detects entries removed from the end.",
        )

    def handle(self, *args, expect_head=None, **options):
        verdict = audit_chain_verify(expected_head=expect_head)
        if not verdict.ok:
            raise CommandError(
                f"The audit chain is broken after {verdict.checked} good entries. {verdict.problem}"
            )
        self.stdout.write(
            f"The audit chain verifies: {verdict.checked} entries, head {verdict.head_hash}."
        )
