from django.core.management.base import BaseCommand, CommandError

from market.audit.selectors import audit_chain_verify, audit_file_verify


class Command(BaseCommand):
    help = (
        "Verify the audit log's hash chain (or, with --file, an exported JSON-lines file); exits non-zero when an "
        "entry was edited, deleted or reordered."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--expect-head",
            default=None,
            help="A head hash printed by an earlier run: also detects entries removed from the end.",
        )
        parser.add_argument(
            "--file",
            default=None,
            help="An export of audit_export (or the audit log page) to verify instead of the database.",
        )

    def handle(self, *args, expect_head=None, file=None, **options):
        if file is None:
            verdict, what = audit_chain_verify(expected_head=expect_head), "The audit chain"
        else:
            try:
                with open(file, encoding="utf-8") as lines:
                    verdict = audit_file_verify(lines, expected_head=expect_head)
            except (OSError, ValueError) as error:
                raise CommandError(f"Cannot verify {file}: {error}") from None
            what = f"The exported audit chain in {file}"
        if not verdict.ok:
            raise CommandError(
                f"{what} is broken after {verdict.checked} good entries. {verdict.problem}"
            )
        self.stdout.write(f"{what} verifies: {verdict.checked} entries, head {verdict.head_hash}.")
